"""MLA decode's query side in Triton: the query projection as a weight stream, and the absorbed query.

``projection_parts``: ``x @ W^T`` for a few rows (a decode step's 32) and a large weight (the
query projection's 3,072 x 2,048: 12.6 MB) is bound by reading the weight once, yet cuBLAS's tiles
for 32 rows leave most SMs idle. ``_skinny`` cuts the weight into BLOCK_N-row blocks and K into
SPLIT_K slices (48 x 4 = 192 programs at the pair's shape, all SMs busy, every tile load in flight
at once) and writes each slice's fp32 sums, (SPLIT_K, rows, N); the consumer adds the SPLIT_K
slices and rounds once (1.5 MB of partials each way, in L2), so no reduction launch.
``absorbed_query`` builds the latent kernel's query in one launch: per head, the latent query
``q_nope @ W_UK`` and the rotated RoPE query, written side by side (what a bmm, two cats, a neg and
three elementwise kernels do in the absorbed step); its q is the projection (rows, N) or its
partials (SPLIT_K, rows, N), summed in fp32 and rounded to the weights' dtype as the GEMM rounds.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import triton
import triton.language as tl


class SkinnyConfig(NamedTuple):
    """``_skinny``'s settings: weight rows a program, K per step, K slices, pipelining depth, warps."""

    block_n: int = 64
    block_k: int = 128
    split_k: int = 4
    stages: int = 4
    warps: int = 4


SKINNY = SkinnyConfig()
"""At 3,072 x 2,048: 192 programs of 4 K-steps (all loads issued up front at 4 stages), 96 KB of shared
memory each (two an SM); x's (32 x 2,048) re-reads from L2 half the weight's bytes (estimated, not swept)."""


@triton.jit
def _skinny(x_ptr, w_ptr, out_ptr, rows, n_cols, k_dim, K_SLICE: tl.constexpr, M_PAD: tl.constexpr,
            BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """Program (weight block, K slice): out[slice, :rows, block] = x[:, slice] @ W[block, slice]^T in fp32."""
    blk, part = tl.program_id(0), tl.program_id(1)
    offs_m, offs_n, offs_k = tl.arange(0, M_PAD), blk * BLOCK_N + tl.arange(0, BLOCK_N), tl.arange(0, BLOCK_K)
    keep_m, keep_n = offs_m < rows, offs_n < n_cols
    acc = tl.zeros((M_PAD, BLOCK_N), tl.float32)
    start = part * K_SLICE
    for k in range(start, start + K_SLICE, BLOCK_K):  # k_dim is a multiple of K_SLICE, K_SLICE of BLOCK_K
        x = tl.load(x_ptr + offs_m[:, None] * k_dim + (k + offs_k)[None, :], mask=keep_m[:, None], other=0.0)
        w = tl.load(w_ptr + offs_n[:, None] * k_dim + (k + offs_k)[None, :], mask=keep_n[:, None], other=0.0)
        acc = tl.dot(x, tl.trans(w), acc)
    out = out_ptr + (part * rows + offs_m[:, None]) * n_cols + offs_n[None, :]
    tl.store(out, acc, mask=keep_m[:, None] & keep_n[None, :])


def projection_parts(x: torch.Tensor, w: torch.Tensor, config: SkinnyConfig = SKINNY) -> torch.Tensor:
    """fp32 (split_k, rows, N) whose sum over the first dim is ``x @ w.T``, for x (rows <= 64, K) and
    w (N, K); a K under split_k x block_k takes fewer slices (at least one of min(block_k, K)), and K
    must be a multiple of the slices' total, the step a power of two of at least 16."""
    (rows, k_dim), n_cols = x.shape, w.shape[0]
    block_n, block_k, split_k, stages, warps = config
    block_k = min(block_k, k_dim)
    split_k = max(1, min(split_k, k_dim // block_k))
    if not (rows <= 64 and w.shape[1] == k_dim and k_dim % (split_k * block_k) == 0 and block_k >= 16
            and block_k & (block_k - 1) == 0 and x.is_contiguous() and w.is_contiguous()):
        raise ValueError(f"projection_parts: x {tuple(x.shape)}, w {tuple(w.shape)}, {config}")
    out = torch.empty(split_k, rows, n_cols, device=x.device, dtype=torch.float32)
    _skinny[(triton.cdiv(n_cols, block_n), split_k)](
        x, w, out, rows, n_cols, k_dim, K_SLICE=k_dim // split_k, M_PAD=max(16, triton.next_power_of_2(rows)),
        BLOCK_N=block_n, BLOCK_K=block_k, num_warps=warps, num_stages=stages)
    return out


@triton.jit
def _q_load(q_ptr, offs, keep, plane, SPLIT_K: tl.constexpr, dtype: tl.constexpr):
    """The projection's values at ``offs``: q itself (SPLIT_K 0), or its SPLIT_K fp32 slices (``plane``
    apart) summed in order and rounded once to ``dtype``."""
    total = tl.load(q_ptr + offs, mask=keep, other=0.0)
    for s in tl.static_range(1, SPLIT_K):
        total += tl.load(q_ptr + s * plane + offs, mask=keep, other=0.0)
    return total.to(dtype)


@triton.jit
def _absorb(q_ptr, w_ptr, cos_ptr, sin_ptr, out_ptr, batch, HEADS: tl.constexpr, NOPE: tl.constexpr,
            ROPE: tl.constexpr, LATENT: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK_L: tl.constexpr,
            SPLIT_K: tl.constexpr = 0):
    """Program (head, latent block, batch block): out[b, h, block] = q_nope[b, h] @ W_UK[h][:, block]
    (fp32 sums); the latent block 0 programs also write the rotated RoPE query, out[b, h, LATENT:]."""
    head, blk, rows = tl.program_id(0), tl.program_id(1), tl.program_id(2) * BLOCK_B + tl.arange(0, BLOCK_B)
    keep = rows[:, None] < batch
    plane = batch * HEADS * (NOPE + ROPE)
    q_rows = rows[:, None] * (HEADS * (NOPE + ROPE)) + head * (NOPE + ROPE)
    out_rows = out_ptr + (rows[:, None] * HEADS + head) * (LATENT + ROPE)
    offs_k, offs_l = tl.arange(0, NOPE), blk * BLOCK_L + tl.arange(0, BLOCK_L)
    q_nope = _q_load(q_ptr, q_rows + offs_k[None, :], keep, plane, SPLIT_K, w_ptr.dtype.element_ty)
    w = tl.load(w_ptr + (head * NOPE + offs_k[:, None]) * LATENT + offs_l[None, :])
    tl.store(out_rows + offs_l[None, :], tl.dot(q_nope, w).to(out_ptr.dtype.element_ty), mask=keep)
    if blk == 0:  # q_rope * cos + [-q_rope[half:], q_rope[:half]] * sin
        offs_r = tl.arange(0, ROPE)
        half: tl.constexpr = ROPE // 2
        q_rope = _q_load(q_ptr, q_rows + NOPE + offs_r[None, :], keep, plane, SPLIT_K, w_ptr.dtype.element_ty)
        other = _q_load(q_ptr, q_rows + NOPE + ((offs_r + half) % ROPE)[None, :], keep, plane, SPLIT_K,
                        w_ptr.dtype.element_ty)
        cos = tl.load(cos_ptr + offs_r).to(tl.float32)
        sin = tl.load(sin_ptr + offs_r).to(tl.float32) * tl.where(offs_r < half, -1.0, 1.0)
        rotated = q_rope.to(tl.float32) * cos[None, :] + other.to(tl.float32) * sin[None, :]
        tl.store(out_rows + LATENT + offs_r[None, :], rotated.to(out_ptr.dtype.element_ty), mask=keep)


def absorbed_query(q: torch.Tensor, w_uk: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rope: int) -> torch.Tensor:
    """The latent kernel's query (batch, heads, latent + rope), in W_UK's dtype, from the query
    projection q (batch, heads x (nope + rope)) or its fp32 partials (split_k, batch, heads x (nope +
    rope)) and W_UK (heads, nope, latent), in one launch; nope, rope and the latent block powers of
    two of at least 16."""
    (heads, nope, latent), batch, split_k = w_uk.shape, q.shape[-2], q.shape[0] if q.dim() == 3 else 0
    block_l = min(latent, 128)
    ok = all(d >= 16 and d & (d - 1) == 0 for d in (nope, rope, block_l)) and latent % block_l == 0
    if not (ok and q.is_contiguous() and w_uk.is_contiguous() and q.shape[-1] == heads * (nope + rope)
            and (split_k == 0 or q.dtype == torch.float32)):
        raise ValueError(f"absorbed_query: q {tuple(q.shape)}, W_UK {tuple(w_uk.shape)}, rope {rope}")
    out = torch.empty(batch, heads, latent + rope, device=q.device, dtype=w_uk.dtype)
    block_b = min(max(triton.next_power_of_2(batch), 16), 32)
    _absorb[(heads, latent // block_l, triton.cdiv(batch, block_b))](
        q, w_uk, cos, sin, out, batch, HEADS=heads, NOPE=nope, ROPE=rope, LATENT=latent, BLOCK_B=block_b,
        BLOCK_L=block_l, SPLIT_K=split_k, num_warps=8 if split_k else 4)  # 4 warps spill the summed partials
    return out
