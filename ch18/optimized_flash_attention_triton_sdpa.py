"""Optimized flash attention, PyTorch's variant: SDPA restricted to its flash backend (FlashAttention-2).

Baseline (baseline_flash_attention_triton.py): Q K^T, mask, softmax and P V as separate ops through HBM.
Optimized: ``F.scaled_dot_product_attention(q, k, v, is_causal=True)`` under
``sdpa_kernel(SDPBackend.FLASH_ATTENTION)``: the same algorithm as our Triton kernel (tiles, online
softmax, causal block skipping) in PyTorch's bundled FlashAttention-2 CUDA kernel, written for
Ampere (mma.sync, cp.async), so on Hopper it does not use wgmma or TMA. The reference point our
Triton kernel is measured against, with the cuDNN variant.
Expect (measured, H200, 2026-11-27): 16.40 ms -> 1.754 ms, 9.35x (median ratio; estimated ~1.5-1.7 ms);
313.5 TFLOP/s, 40% of the bf16 peak: slower than our Triton kernel (1.398 ms). 2026-11-26: 1.766 ms.
Run: python ch18/optimized_flash_attention_triton_sdpa.py  |  aisp bench run -t ch18:flash_attention_triton
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from baseline_flash_attention_triton import MaterializedAttention
from torch.nn.attention import SDPBackend, sdpa_kernel

import aisp


class SDPAFlashAttention(MaterializedAttention):
    backend = SDPBackend.FLASH_ATTENTION

    def prepare(self) -> None:
        """No mask: ``is_causal``."""

    def run(self) -> torch.Tensor:
        with sdpa_kernel(self.backend):
            return F.scaled_dot_product_attention(self.q, self.k, self.v, is_causal=True)


def get_benchmark() -> aisp.Benchmark:
    return SDPAFlashAttention()


if __name__ == "__main__":
    aisp.main(get_benchmark)
