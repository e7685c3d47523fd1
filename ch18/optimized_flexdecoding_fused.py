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
Expect: not yet measured. Estimate (arithmetic, not a measurement): the parent's 0.1972 ms less ~15
us of mask kernels, ~9-10 us of merge and ~3 us of partial writes: ~0.165-0.175 ms, 0.537 GB at
3.1-3.3 TB/s, 73-78% of HBM (parent 65%). 80% (0.160 ms) needs the kernel itself faster than its
156 us at 76% of DRAM (PyTorch 2.13's heuristics, read not traced, give it 1 stage on sm_90).
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


class FusedMaskFlexDecode(SplitFlexDecode):
    kernel_options = {"SPLIT_KV": SPLIT_KV}

    def step(self) -> torch.Tensor:
        options = self.kernel_options if self.device.type == "cuda" else None
        return window_decode_on(self.device)(self.q, self.k, self.v, self.pos, self.workload.span, options)


def get_benchmark() -> aisp.Benchmark:
    return FusedMaskFlexDecode()


if __name__ == "__main__":
    aisp.main(get_benchmark)
