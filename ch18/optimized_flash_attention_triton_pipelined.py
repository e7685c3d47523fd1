"""Optimized flash attention, pipelined variant: the TMA kernel with one tile's softmax over the previous tile's P V product.

Baseline (baseline_flash_attention_triton.py): Q K^T, mask, softmax and P V as separate ops through HBM.
Optimized: ``flash_attention_pipelined`` (ch18_attention_pipelined.py), the ``_tma`` kernel
(descriptors, L2-grouped heads, the scale folded into exp2) with its key loop reordered as in
FlashAttention-3's intra-warpgroup pipelining: S_j = Q K_j^T, then acc += P_{j-1} V_{j-1}, then
tile j's softmax while that product runs on the tensor cores (P and alpha carried to the next
iteration; the first softmax and the last P V peeled). Its sm_90 PTX and SASS show the P V wgmma in
flight across the exp2s, not serialized; Triton 3.6 still waits for each S_j before the softmax.
One config: 128 x 128 tiles, 2 stages, 244 registers (one program an SM), tuned at the first call.
Expected between ``_tma`` and cuDNN if the overlap paid for the second program per SM it gives up.
Expect (measured, H200, 2026-11-28): slower than ``_tma``: 1.403 ms, 11.56x [11.54, 11.58], 392 TFLOP/s in
the timed run (``_tma`` 1.16 ms, 474); 1.422 ms, 387 TFLOP/s (49%) in the GPU test. Why (Nsight Compute, H200,
2026-11-29): one program of 8 warps an SM keeps the tensor pipe 41.9% busy (1,402 us), ``_tma``'s two 50.7% (1,161 us).
Run: python ch18/optimized_flash_attention_triton_pipelined.py  |  aisp bench run -t ch18:flash_attention_triton
"""

from __future__ import annotations

import torch
from ch18_attention_pipelined import flash_attention_pipelined
from optimized_flash_attention_triton import TritonFlashAttention

import aisp


class PipelinedFlashAttention(TritonFlashAttention):
    def run(self) -> torch.Tensor:
        return flash_attention_pipelined(self.q, self.k, self.v, causal=True)


def get_benchmark() -> aisp.Benchmark:
    return PipelinedFlashAttention()


if __name__ == "__main__":
    aisp.main(get_benchmark)
