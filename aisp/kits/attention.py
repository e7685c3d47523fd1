"""What attention pairs of several chapters share: checking that cuDNN's fused attention can run here."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from aisp.harness.benchmark import Unavailable


def require_cudnn_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Raises Unavailable (the pair's variant is skipped with the reason) where cuDNN attention cannot
    run a causal call on these inputs' kind: tried on one head of one sequence. No GPU, a PyTorch
    built without it, or a shape it does not take."""
    if q.device.type != "cuda":
        raise Unavailable("cuDNN attention needs a CUDA GPU")
    try:
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            F.scaled_dot_product_attention(q[:1, :1], k[:1, :1], v[:1, :1], is_causal=True)
    except RuntimeError as err:
        raise Unavailable(f"cuDNN attention is not available here: {err}".splitlines()[0]) from err
