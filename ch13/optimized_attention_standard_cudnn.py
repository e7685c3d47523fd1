"""Optimized attention, cuDNN's backend: ``scaled_dot_product_attention`` pinned to cuDNN attention.

Baseline (baseline_attention_standard.py): QK^T, mask, softmax and PV as separate kernels with
the S x S scores in HBM.
Optimized: the same fused call as optimized_attention_standard.py, but under
``sdpa_kernel(SDPBackend.CUDNN_ATTENTION)``. PyTorch's FlashAttention backend is FlashAttention-2,
written for Ampere (mma.sync, cp.async): on Hopper it issues no wgmma and no TMA, and it read 283
TFLOP/s here (36% of the bf16 peak). cuDNN's fused attention uses both on Hopper; in ch18, at 4 x
32 x 4K, it read 77% of the peak where the FlashAttention backend read 42%. Which backend SDPA picks
by default depends on the PyTorch version; pinning one makes the lesson's kernel the one timed.
Skipped (``aisp.Unavailable``) where this PyTorch build or GPU has no cuDNN attention for the shape.
Expect: measured on an H200 (2026-11-28, 8 x 16 x 2K, head 128, causal): 0.269 ms, 24.49x [24.40, 24.58]
over 6.575 ms, 511 TFLOP/s (65% of the bf16 peak); the FlashAttention backend 0.4778 ms, 288 (37%).
Profiled (Nsight Compute, H200, 2026-11-29, ``aisp profile diff -t ch13:attention_standard``): one kernel
of 271 us, <<<132, 384>>>, tensor pipe 59%, DRAM 20%, occupancy 14%, top stall barrier (README).
Run: python ch13/optimized_attention_standard_cudnn.py  |  aisp bench run -t ch13:attention_standard
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from optimized_attention_standard import FlashAttention
from torch.nn.attention import SDPBackend, sdpa_kernel

import aisp
from aisp.kits.attention import require_cudnn_attention


class OnCuDNN:
    """Mixin: after the pair's setup, skip where cuDNN attention cannot run; run() calls SDPA on it."""

    def setup(self) -> None:
        super().setup()
        require_cudnn_attention(self.q, self.k, self.v)

    def run(self) -> torch.Tensor:
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(self.q, self.k, self.v, is_causal=True)


class CuDNNAttention(OnCuDNN, FlashAttention):
    """attention_standard's shape on cuDNN."""


def get_benchmark() -> aisp.Benchmark:
    return CuDNNAttention()


if __name__ == "__main__":
    aisp.main(get_benchmark)
