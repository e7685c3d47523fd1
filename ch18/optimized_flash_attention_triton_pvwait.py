"""Optimized flash attention, pvwait variant: the TMA kernel at two programs an SM without its wgmma serialized.

Baseline (baseline_flash_attention_triton.py): Q K^T, mask, softmax and P V as separate ops through HBM.
Optimized: ``flash_attention_pvwait`` (ch18_attention_pvwait.py), the ``_tma`` kernel (descriptors,
L2-grouped heads, the scale folded into exp2) at its measured config (128 x 64 tiles, 2 stages,
capped at 128 registers: two programs an SM), with each tile's P V product waited for inside its
iteration (an empty asm statement reads acc). In ``_tma`` that product stays in flight across the
loop's back edge and the next Q K^T, which pins 112 registers, so ptxas serializes every wgmma
(advisory C7512, insufficient registers: a wait after each of the 12 HGMMAs of a key tile). Here:
no C7512, 127 registers, no spills, 2 waits a key tile, 329 SASS instructions a tile against 349.
One config, compiled at the first call (untimed).
Expect: not yet measured. Estimate (arithmetic, not a measurement): 1.00-1.12 ms (490-550 TFLOP/s,
63-70% of the 783 TFLOP/s bf16 peak) against ``_tma``'s 1.160 ms: per SM and key tile the four
warpgroups need 2,048 tensor-pipe cycles (12 HGMMAs each of 32-64 cycles) and 16 warps x 329
instructions over 4 schedulers, 1,316 issue cycles, so without the per-HGMMA waits the tensor pipe,
busy 50.7% of cycles in ``_tma`` (Nsight Compute, H200, 2026-11-29), has room to reach cuDNN's 67%.
Run: python ch18/optimized_flash_attention_triton_pvwait.py  |  aisp bench run -t ch18:flash_attention_triton
"""

from __future__ import annotations

import torch
from ch18_attention_pvwait import flash_attention_pvwait
from optimized_flash_attention_triton import TritonFlashAttention

import aisp


class PVWaitFlashAttention(TritonFlashAttention):
    def run(self) -> torch.Tensor:
        return flash_attention_pvwait(self.q, self.k, self.v, causal=True)


def get_benchmark() -> aisp.Benchmark:
    return PVWaitFlashAttention()


if __name__ == "__main__":
    aisp.main(get_benchmark)
