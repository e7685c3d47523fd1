"""What attention pairs of several chapters share: checking that cuDNN's fused attention can run here,
and FlexAttention compiled under max-autotune."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.flex_attention import flex_attention

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


FLEX_AUTOTUNE = "max-autotune-no-cudagraphs"
"""The torch.compile mode of the FlexAttention ``_autotuned`` variants: Inductor compiles and times
the FlexAttention template's tile configs at the first call and keeps the fastest; no CUDA graphs
(each call is timed as the pair issues it)."""


def autotuned_flex() -> Callable[..., torch.Tensor]:
    """``flex_attention`` compiled for static shapes under :data:`FLEX_AUTOTUNE` (the GPU path of the
    ``_autotuned`` variants of ch13, ch14, ch16 and ch18)."""
    return torch.compile(flex_attention, dynamic=False, mode=FLEX_AUTOTUNE)
