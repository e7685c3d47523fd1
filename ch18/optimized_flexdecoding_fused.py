"""Optimized flex decoding, graphed, the BlockMask build compiled with the kernel, and 4x fewer splits.

Baseline (baseline_flexdecoding.py): SDPA with a dense additive mask over all 32,768 cache slots.
Optimized: ``optimized_flexdecoding_split.py``'s graphed step, less what ran around its kernel. Its
torch trace (H200, 2026-11-29): 186 us of kernels a call, the flex kernel 156, the merge of the
split partials 13.6, and 13 small kernels 17.9 us, ~12 of them the ~11 eager index ops of
``window_block_mask`` (each a launch of a few hundred bytes). Here:
- ``ch18_flex.window_decode``, the mask, the BlockMask and ``flex_attention`` together, is compiled as
  ONE graph (``fullgraph=True``), so Inductor fuses the index ops into one or two kernels (on a CPU
  it makes one, writing both the block counts and the block lists); still built from ``pos`` at
  every call, inside the CUDA graph.
- ``SPLIT_KV`` 8, not 32. This PyTorch's flex-decoding template (``ch18_flex.splits_follow_the_mask``
  checks the installed one) sizes a program's share from the row's listed blocks when no full blocks
  are listed: cdiv(33 x 128 / SPLIT_KV) rounded to its 64-key tile. At 32 that is 3 tiles a program,
  22 busy and 10 empty programs a (row, K/V head), and all 32 write fp32 partials (16.8 MB, then
  read by the merge). At 8: 9 tiles, 8 busy programs a pair (2,048 in all, ~4 waves of ~4 an SM),
  4.2 MB of partials, a merge 1/4 the size. If the template sizes splits from the cache length
  instead (older PyTorch: 8 would leave 2 busy programs a pair), it keeps the measured 32.
Same inputs and output; the window and its blocks are exact, as the parent's.
``TUNED`` (module constant, empty: the measured config) adds kernel options from
``python ch18/kernel_sweep.py flexdecoding``, which times SPLIT_KV, BLOCK_N, num_stages, num_warps.
Expect (measured, H200, 2026-11-29): with TUNED (2 stages) 1.400 -> 0.1512 ms, 9.34x [9.04, 9.66],
84.6% of HBM (3.55 TB/s). Before it, with the template's unpipelined (64, 1, 2): 1.413 -> 0.1722 ms,
8.30x [8.05, 8.56], 74.3% (first run 0.1723 ms); ``_split`` 0.198, ``_graph`` 0.227, eager 0.235 ms
(estimated 0.165-0.175 ms). Profiled then (torch profiler): 163 us of kernels a call, the flex kernel
153 (94%), two small reductions 4.4 + 3.6, two index kernels ~1.8; on sm_90 PyTorch's heuristic falls
back to (BLOCK_N 64, 1 stage, 2 warps), so K/V loads were not pipelined: the sweep found 2 stages.
Run: python ch18/optimized_flexdecoding_fused.py  |  aisp bench run -t ch18:flexdecoding
"""

from __future__ import annotations

import torch
from ch18_flex import splits_follow_the_mask, window_decode_on
from optimized_flexdecoding_split import SPLIT_KV as MEASURED_SPLIT_KV
from optimized_flexdecoding_split import SplitFlexDecode

import aisp

SPLIT_KV = 8 if splits_follow_the_mask() else MEASURED_SPLIT_KV
"""Programs a (row, K/V head) pair's window is cut into: 8 of 9 tiles (576 keys) each, all busy."""
TUNED: dict[str, int | bool] = {"BLOCK_N": 64, "num_stages": 2, "num_warps": 2}
"""Kernel options over the template's own (BLOCK_N 64, num_stages 1, num_warps 2): 2 stages, so the
next K/V tile loads while this one computes. ``python ch18/kernel_sweep.py flexdecoding`` (H200,
2026-11-29) read 0.1427 ms against 0.1691 for the template's own, output bitwise the same; the
fastest of 13 settings (BLOCK_N 128, 2 stages, 4 warps) 0.1425 ms, within 4.9e-4 of it."""


class FusedMaskFlexDecode(SplitFlexDecode):
    kernel_options = {"SPLIT_KV": SPLIT_KV, **TUNED}

    def step(self) -> torch.Tensor:
        options = self.kernel_options if self.device.type == "cuda" else None
        return window_decode_on(self.device)(self.q, self.k, self.v, self.pos, self.workload.span, options)


def get_benchmark() -> aisp.Benchmark:
    return FusedMaskFlexDecode()


if __name__ == "__main__":
    aisp.main(get_benchmark)
