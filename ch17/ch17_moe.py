"""What chapter 17's MoE pairs share: a top-k router and SwiGLU experts, and the two ways of running
the experts over tokens sorted by expert: one grouped GEMM (``torch._grouped_mm``, where this torch
has it) or a batched GEMM over a padded (experts, capacity, dim) buffer.

Weights are drawn from a seed alike on every rank; expert e's gate/up weights are ``w_gate_up[e]``
(dim, 2 * ffn) and its down weights ``w_down[e]`` (ffn, dim): the (groups, K, N) layout both
``_grouped_mm`` and ``bmm`` take. bf16 on a GPU, fp32 on a CPU (the tests).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

HAS_GROUPED_MM = hasattr(torch, "_grouped_mm")
"""``torch._grouped_mm`` (bf16 on sm_90 in torch >= 2.8); without it the padded bmm path is used."""


def dtype_on(device: torch.device) -> torch.dtype:
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def expert_weights(experts: int, dim: int, ffn: int, gen: torch.Generator, device: torch.device,
                   dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(w_gate_up (experts, dim, 2 ffn), w_down (experts, ffn, dim)), N(0, 1/fan_in)."""
    gate_up = torch.randn(experts, dim, 2 * ffn, generator=gen, device=device) / dim ** 0.5
    down = torch.randn(experts, ffn, dim, generator=gen, device=device) / ffn ** 0.5
    return gate_up.to(dtype), down.to(dtype)


def route(x: torch.Tensor, w_router: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-``k`` experts per token (tokens, k) and their gates (softmax over the k logits, fp32)."""
    logits, ids = (x @ w_router).float().topk(k, dim=-1)
    return ids, torch.softmax(logits, dim=-1)


def swiglu(h: torch.Tensor) -> torch.Tensor:
    ffn = h.shape[-1] // 2
    return F.silu(h[..., :ffn]) * h[..., ffn:]


def sort_by_expert(ids: torch.Tensor, experts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The (token, slot) assignments flattened and sorted by expert (stable: token order within an
    expert): their flat indices (assignments,) and each expert's count (experts,), on the device."""
    flat = ids.reshape(-1)
    return flat.argsort(stable=True), torch.bincount(flat, minlength=experts)


def grouped_ffn(xs: torch.Tensor, counts: torch.Tensor, w_gate_up: torch.Tensor, w_down: torch.Tensor) -> torch.Tensor:
    """Experts over rows ``xs`` sorted by expert (``counts`` rows each): two grouped GEMMs, no host sync."""
    offs = counts.cumsum(0).to(torch.int32)
    h = torch._grouped_mm(xs, w_gate_up, offs=offs)
    return torch._grouped_mm(swiglu(h), w_down, offs=offs)


def padded_ffn(xs: torch.Tensor, sorted_ids: torch.Tensor, counts: torch.Tensor, w_gate_up: torch.Tensor,
               w_down: torch.Tensor) -> torch.Tensor:
    """The same with two ``bmm`` over (experts, capacity, dim), capacity = the busiest expert's rows
    (one host sync for that size); padding rows are zeros and are dropped after."""
    experts = w_gate_up.shape[0]
    capacity = int(counts.max())
    starts = counts.cumsum(0) - counts
    slot = torch.arange(len(xs), device=xs.device) - starts[sorted_ids]
    padded = xs.new_zeros(experts, capacity, xs.shape[1])
    padded[sorted_ids, slot] = xs
    y = torch.bmm(swiglu(torch.bmm(padded, w_gate_up)), w_down)
    return y[sorted_ids, slot]


def expert_ffn(xs: torch.Tensor, sorted_ids: torch.Tensor, counts: torch.Tensor, w_gate_up: torch.Tensor,
               w_down: torch.Tensor, padded: bool = False) -> torch.Tensor:
    """:func:`grouped_ffn` where this torch has ``_grouped_mm`` (and not ``padded``), else :func:`padded_ffn`."""
    if HAS_GROUPED_MM and not padded:
        return grouped_ffn(xs, counts, w_gate_up, w_down)
    return padded_ffn(xs, sorted_ids, counts, w_gate_up, w_down)
