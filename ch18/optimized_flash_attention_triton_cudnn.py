"""Optimized flash attention, cuDNN's variant: SDPA restricted to the cuDNN attention backend.

Baseline (baseline_flash_attention_triton.py): Q K^T, mask, softmax and P V as separate ops through HBM.
Optimized: ``F.scaled_dot_product_attention(q, k, v, is_causal=True)`` under
``sdpa_kernel(SDPBackend.CUDNN_ATTENTION)``: cuDNN's fused attention, which on Hopper issues wgmma
and loads tiles with TMA (a FlashAttention-3-like design); usually PyTorch's fastest backend
there, so the ceiling our Triton kernel is held against. Skipped (``aisp.Unavailable``) where this
PyTorch build or GPU has no cuDNN attention for the shape.
Expect (measured, H200, 2026-11-27): 16.40 ms -> 1.025 ms, 16.09x [15.65, 16.55] (estimated ~1.0-1.2
ms, 57-70% of peak): the pair's winner; 536.5 TFLOP/s, 69% of the bf16 peak (2026-11-26: 1.061 ms, 66%).
Run: python ch18/optimized_flash_attention_triton_cudnn.py  |  aisp bench run -t ch18:flash_attention_triton
"""

from __future__ import annotations

from optimized_flash_attention_triton_sdpa import SDPAFlashAttention
from torch.nn.attention import SDPBackend

import aisp
from aisp.kits.attention import require_cudnn_attention


class CuDNNAttention(SDPAFlashAttention):
    backend = SDPBackend.CUDNN_ATTENTION

    def prepare(self) -> None:
        """Fails over to a skip where cuDNN attention cannot run these inputs."""
        require_cudnn_attention(self.q, self.k, self.v)


def get_benchmark() -> aisp.Benchmark:
    return CuDNNAttention()


if __name__ == "__main__":
    aisp.main(get_benchmark)
