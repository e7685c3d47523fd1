"""Optimized flash attention, hostdesc variant: the ahead kernel over TMA descriptors made on the host.

Baseline (baseline_flash_attention_triton.py): Q K^T, mask, softmax and P V as separate ops through HBM.
Optimized: ``flash_attention_hostdesc`` (ch18_attention_hostdesc.py), ``_ahead``'s kernel (the same key
loop, 128 x 64 tiles, 8 warps, 2 stages, 128 registers: two programs an SM, L2-grouped launch order)
with its Q, K, V and O descriptors made once a call on the host and passed as kernel parameters. In
``_ahead`` each of the 4,096 programs first writes four 128-byte descriptors to global scratch, each
behind a ``tensormap.cp_fenceproxy`` release and a ``fence.proxy.tensormap`` acquire, before its Q and
first K copies can go out; here nothing precedes them but the program's tile. Compiled for sm_90a
without a GPU: 128 registers, no spills, no stack, no ptxas advisory, no ``tensormap`` instruction
in the PTX, 336 SASS instructions an off-diagonal key tile (``_ahead`` 325: the parameter
descriptors' addresses moved to uniform registers at each copy), the diagonal block's one masked
tile straight-line code. One launch setting, nothing tuned, compiled at the first call (untimed).
Expect: not yet measured. Estimate (arithmetic, not a measurement): 0.94-0.97 ms, 72-74% of the 783
TFLOP/s bf16 peak, 2-5% under ``_ahead``'s 0.989 ms: the same change made ``aisp.kits.sparse_flash``
7.5-8.3% faster on an H200 for programs of ~17-19 key tiles; ch18's programs walk ~33 on average, so
the per-program start it saves weighs about half as much (3.4% more instructions a tile, with issue
active at ~38% in the profiled ``_tma``, should not take it back). Likely still behind cuDNN (0.92 ms).
Run: python ch18/optimized_flash_attention_triton_hostdesc.py  |  aisp bench run -t ch18:flash_attention_triton
"""

from __future__ import annotations

import torch
from ch18_attention_hostdesc import flash_attention_hostdesc
from optimized_flash_attention_triton import TritonFlashAttention

import aisp


class HostDescriptorFlashAttention(TritonFlashAttention):
    def run(self) -> torch.Tensor:
        return flash_attention_hostdesc(self.q, self.k, self.v, causal=True)


def get_benchmark() -> aisp.Benchmark:
    return HostDescriptorFlashAttention()


if __name__ == "__main__":
    aisp.main(get_benchmark)
