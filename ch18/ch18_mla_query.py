"""MLA decode's query side in Triton: the absorbed query.

``absorbed_query`` builds the latent kernel's query in one launch: per head, the latent query
``q_nope @ W_UK`` and the rotated RoPE query, written side by side (what a bmm, two cats, a neg and
three elementwise kernels do in the absorbed step).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _absorb(q_ptr, w_ptr, cos_ptr, sin_ptr, out_ptr, batch, HEADS: tl.constexpr, NOPE: tl.constexpr,
            ROPE: tl.constexpr, LATENT: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK_L: tl.constexpr):
    """Program (head, latent block, batch block): out[b, h, block] = q_nope[b, h] @ W_UK[h][:, block]
    (fp32 sums); the latent block 0 programs also write the rotated RoPE query, out[b, h, LATENT:]."""
    head, blk, rows = tl.program_id(0), tl.program_id(1), tl.program_id(2) * BLOCK_B + tl.arange(0, BLOCK_B)
    keep = rows[:, None] < batch
    q_rows = q_ptr + rows[:, None] * (HEADS * (NOPE + ROPE)) + head * (NOPE + ROPE)
    out_rows = out_ptr + (rows[:, None] * HEADS + head) * (LATENT + ROPE)
    offs_k, offs_l = tl.arange(0, NOPE), blk * BLOCK_L + tl.arange(0, BLOCK_L)
    q_nope = tl.load(q_rows + offs_k[None, :], mask=keep, other=0.0)
    w = tl.load(w_ptr + (head * NOPE + offs_k[:, None]) * LATENT + offs_l[None, :])
    tl.store(out_rows + offs_l[None, :], tl.dot(q_nope, w).to(out_ptr.dtype.element_ty), mask=keep)
    if blk == 0:  # q_rope * cos + [-q_rope[half:], q_rope[:half]] * sin
        offs_r = tl.arange(0, ROPE)
        half: tl.constexpr = ROPE // 2
        q_rope = tl.load(q_rows + NOPE + offs_r[None, :], mask=keep, other=0.0).to(tl.float32)
        other = tl.load(q_rows + NOPE + ((offs_r + half) % ROPE)[None, :], mask=keep, other=0.0).to(tl.float32)
        cos = tl.load(cos_ptr + offs_r).to(tl.float32)
        sin = tl.load(sin_ptr + offs_r).to(tl.float32) * tl.where(offs_r < half, -1.0, 1.0)
        rotated = q_rope * cos[None, :] + other * sin[None, :]
        tl.store(out_rows + LATENT + offs_r[None, :], rotated.to(out_ptr.dtype.element_ty), mask=keep)


def absorbed_query(q: torch.Tensor, w_uk: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rope: int) -> torch.Tensor:
    """The latent kernel's query (batch, heads, latent + rope) from the query projection q (batch,
    heads x (nope + rope)) and W_UK (heads, nope, latent), in one launch; nope, rope and the latent
    block powers of two of at least 16."""
    (heads, nope, latent), batch = w_uk.shape, q.shape[0]
    block_l = min(latent, 128)
    ok = all(d >= 16 and d & (d - 1) == 0 for d in (nope, rope, block_l)) and latent % block_l == 0
    if not (ok and q.is_contiguous() and w_uk.is_contiguous() and q.shape[1] == heads * (nope + rope)):
        raise ValueError(f"absorbed_query: q {tuple(q.shape)}, W_UK {tuple(w_uk.shape)}, rope {rope}")
    out = q.new_empty(batch, heads, latent + rope)
    block_b = min(max(triton.next_power_of_2(batch), 16), 32)
    _absorb[(heads, latent // block_l, triton.cdiv(batch, block_b))](
        q, w_uk, cos, sin, out, batch, HEADS=heads, NOPE=nope, ROPE=rope, LATENT=latent, BLOCK_B=block_b,
        BLOCK_L=block_l, num_warps=4)
    return out
