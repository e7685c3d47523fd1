"""A mixture-of-experts FFN layer that chapters share (17: grouped GEMM and expert parallelism; 20:
the MoE case study): its workload and seeded weights, a top-k router and SwiGLU experts, the per-expert
loop a first MoE layer is written as, and the ways of running the experts over tokens sorted by
expert: one grouped GEMM (``torch._grouped_mm``, where this torch has it) or a batched GEMM over a
padded (experts, capacity, dim) buffer.

Expert e's gate/up weights are ``w_gate_up[e]`` (dim, 2 ffn) and its down weights ``w_down[e]``
(ffn, dim): the (groups, K, N) layout both ``_grouped_mm`` and ``bmm`` take. bf16 on a GPU, fp32 on
a CPU (the tests).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from aisp.harness.benchmark import Requirements, Workload
from aisp.kits.llm.serving import dtype_on

HAS_GROUPED_MM = hasattr(torch, "_grouped_mm")
"""``torch._grouped_mm`` (bf16 on sm_90 in torch >= 2.8); without it the padded bmm path is used."""


@dataclass(frozen=True, kw_only=True)
class MoEWorkload(Workload):
    tokens: int = 16384
    """Tokens of the batch (one row each)."""
    dim: int = 2048
    """Model width."""
    ffn: int = 1024
    """Each expert's SwiGLU width."""
    experts: int = 64
    """Experts of the layer."""
    top_k: int = 8
    """Experts each token is routed to."""


def moe_workload(requires: Requirements, activation_passes: int, **kw: object) -> MoEWorkload:
    """The sizes in ``kw`` with their accounting: the router GEMM and three expert GEMMs per
    assignment; bytes: the bf16 expert weights and ``activation_passes`` bf16 (tokens, dim) passes."""
    w = MoEWorkload(**kw)
    assignments = w.tokens * w.top_k
    flops = 2.0 * w.tokens * w.dim * w.experts + 6.0 * assignments * w.dim * w.ffn
    weights = 2.0 * w.experts * 3 * w.dim * w.ffn
    return replace(w, flops=flops, bytes=weights + 2.0 * w.tokens * w.dim * activation_passes, items=w.tokens,
                   item_unit="tokens", precision="bf16", requires=requires)


def expert_weights(experts: int, dim: int, ffn: int, gen: torch.Generator, device: torch.device,
                   dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(w_gate_up (experts, dim, 2 ffn), w_down (experts, ffn, dim)), N(0, 1/fan_in)."""
    gate_up = torch.randn(experts, dim, 2 * ffn, generator=gen, device=device) / dim ** 0.5
    down = torch.randn(experts, ffn, dim, generator=gen, device=device) / ffn ** 0.5
    return gate_up.to(dtype), down.to(dtype)


def moe_inputs(w: MoEWorkload, gen: torch.Generator, device: torch.device) -> tuple[torch.Tensor, ...]:
    """(x (tokens, dim), w_router (dim, experts), w_gate_up, w_down), drawn in that order, N(0, 1/fan_in)."""
    dtype = dtype_on(device)
    x = torch.randn(w.tokens, w.dim, generator=gen, device=device).to(dtype)
    w_router = (torch.randn(w.dim, w.experts, generator=gen, device=device) / w.dim ** 0.5).to(dtype)
    return (x, w_router, *expert_weights(w.experts, w.dim, w.ffn, gen, device, dtype))


def route(x: torch.Tensor, w_router: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-``k`` experts per token (tokens, k) and their gates (softmax over the k logits, fp32)."""
    logits, ids = (x @ w_router).float().topk(k, dim=-1)
    return ids, torch.softmax(logits, dim=-1)


def swiglu(h: torch.Tensor) -> torch.Tensor:
    ffn = h.shape[-1] // 2
    return F.silu(h[..., :ffn]) * h[..., ffn:]


def masked_moe(x: torch.Tensor, w_router: torch.Tensor, w_gate_up: torch.Tensor, w_down: torch.Tensor,
               k: int) -> torch.Tensor:
    """The layer as a first MoE layer is written: route, then per expert a boolean mask and
    ``nonzero()`` (a host sync: the result's size), a gather, two GEMMs and the SwiGLU, the gated
    outputs added into an fp32 result with ``index_add_``. Returns (tokens, dim) in x's dtype."""
    ids, gates = route(x, w_router, k)
    out = torch.zeros(x.shape, device=x.device)
    for e in range(len(w_gate_up)):
        token, slot = (ids == e).nonzero(as_tuple=True)  # host sync: the result's size
        if token.numel() == 0:
            continue
        y = swiglu(x[token] @ w_gate_up[e]) @ w_down[e]
        out.index_add_(0, token, y.float() * gates[token, slot, None])
    return out.to(x.dtype)


def sort_by_expert(ids: torch.Tensor, experts: int, count_on_device: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """The (token, slot) assignments flattened and sorted by expert (stable: token order within an
    expert): their flat indices (assignments,) and each expert's count (experts,), on the device.
    Counted by ``bincount``, or with ``count_on_device`` by an ``index_add_`` of ones (CUDA's
    ``bincount`` reads the input's max on the host: a sync)."""
    flat = ids.reshape(-1)
    if count_on_device:
        counts = torch.zeros(experts, dtype=torch.long, device=ids.device).index_add_(0, flat, torch.ones_like(flat))
        return flat.argsort(stable=True), counts
    return flat.argsort(stable=True), torch.bincount(flat, minlength=experts)


def sorted_rows(order: torch.Tensor) -> torch.Tensor:
    """The inverse of ``sort_by_expert``'s order: for each flat (token, slot) assignment, its row in
    the expert-sorted outputs (a scatter of the int64 indices, so the outputs are gathered back
    in place of being scattered)."""
    rows = torch.empty_like(order)
    rows[order] = torch.arange(order.numel(), device=order.device)
    return rows


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
