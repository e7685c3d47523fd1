"""Optimized long-context attention, cuDNN's backend: one causal SDPA call over 32K tokens on cuDNN.

Baseline (baseline_long_context_attention.py): 16 query chunks, each materializing up to
2,048 x 32,768 scores per head in HBM (bf16, then fp32 for the softmax).
Optimized: the same single call as optimized_long_context_attention.py under
``sdpa_kernel(SDPBackend.CUDNN_ATTENTION)``: cuDNN's Hopper kernels (wgmma, TMA) instead of
PyTorch's FlashAttention-2 backend, which read 349 TFLOP/s here (45% of the bf16 peak; see
optimized_attention_standard_cudnn.py for why the backend matters on Hopper). Extra memory stays
O(S). Skipped (``aisp.Unavailable``) where cuDNN attention cannot run these inputs.
Expect: measured on an H200 (2026-11-28, 1 x 16 x 32K, head 128, causal): 6.564 ms, 17.98x
[17.95, 18.01] over the chunked baseline, 670 TFLOP/s (85.5% of the bf16 peak); the FlashAttention
backend 12.60 ms, 349 TFLOP/s (45%) in the same run.
Run: python ch13/optimized_long_context_attention_cudnn.py  |  aisp bench run -t ch13:long_context_attention
"""

from __future__ import annotations

from optimized_attention_standard_cudnn import OnCuDNN
from optimized_long_context_attention import LongContextFlash

import aisp


class LongContextCuDNN(OnCuDNN, LongContextFlash):
    """long_context_attention's single call on cuDNN."""


def get_benchmark() -> aisp.Benchmark:
    return LongContextCuDNN()


if __name__ == "__main__":
    aisp.main(get_benchmark)
