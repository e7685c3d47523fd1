"""Rotary position embedding (RoPE) for :mod:`aisp.kits.llm.model`: pairs (first half, second half)
of each head are rotated by position-dependent angles. :func:`rotation` builds whole-head tables
once per forward; :func:`rotate_` applies them in place in the activations' dtype (one copy and two
kernels per layer); :func:`apply_rope` is the fp32 reference."""

from __future__ import annotations

import torch

from aisp.kits.llm.config import LLMConfig


def rope_tables(cfg: LLMConfig, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of shape (batch, tokens, 1, head_dim / 2) for integer ``positions`` (batch, tokens)."""
    half = cfg.head_dim // 2
    inv = cfg.rope_base ** (-torch.arange(half, device=positions.device, dtype=torch.float32) / half)
    angles = positions.float()[..., None] * inv
    return angles.cos()[:, :, None], angles.sin()[:, :, None]


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (first half, second half) of ``x`` (batch, tokens, heads, head_dim), in fp32:
    the reference for :func:`rotate_`."""
    a, b = x.float().chunk(2, dim=-1)
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1).to(x.dtype)


def rotation(cfg: LLMConfig, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """RoPE over whole heads for ``positions`` (tokens,): cos and signed sin (tokens, 1, head_dim) in
    ``dtype``, built once per forward for :func:`rotate_`."""
    cos, sin = (t[0] for t in rope_tables(cfg, positions[None]))
    return torch.cat([cos, cos], -1).to(dtype), torch.cat([-sin, sin], -1).to(dtype)


def rotate_(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> None:
    """:func:`apply_rope` in place on ``x`` (tokens, heads, head_dim) in its own dtype, with the tables
    of :func:`rotation`: x * cos + (second half, first half) * signed sin (one copy, two kernels)."""
    half = x.shape[-1] // 2
    swapped = torch.cat([x[..., half:], x[..., :half]], dim=-1)
    x.mul_(cos).addcmul_(swapped, sin)
