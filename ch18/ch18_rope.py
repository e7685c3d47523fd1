"""RoPE on Q and K and the KV-cache write in one Triton kernel (``fused_rope_kv_write``).

Input: one decode step's fused projection ``qkv`` (tokens, (heads + 2 kv_heads) * head_dim): query
heads, then K heads, then V heads, as the serving kit's attention lays them out; token t is cache
row t at position ``positions[t]``. The RoPE tables are the kit's whole-head ones
(``aisp.kits.llm.rope.rotation``): cos and signed sin (max_len, 1, head_dim), so a rotated head is
x * cos + (second half, first half) * sin. One program per (token, head) reads its 128 values
once, rotates them in fp32 (query and K heads), and writes them where they go: the query heads to
the output, K and V straight into the kit's dense cache layout (rows, kv_heads, max_len, head_dim)
at the token's position. One launch replaces the separate RoPE and cache-write ops (~15 launches);
the bytes are the same (read qkv once, write it once), which is why launches, not HBM, bound it.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _rope_write(qkv_ptr, pos_ptr, cos_ptr, sin_ptr, q_ptr, k_ptr, v_ptr, max_len, HEADS: tl.constexpr,
                KV_HEADS: tl.constexpr, D: tl.constexpr):
    """Program (token, head of heads + 2 kv_heads): rotate (Q, K heads) and store (Q out, K/V cache)."""
    t, h = tl.program_id(0), tl.program_id(1)
    offs = tl.arange(0, D)
    src = qkv_ptr + (t.to(tl.int64) * (HEADS + 2 * KV_HEADS) + h) * D
    x = tl.load(src + offs).to(tl.float32)
    pos = tl.load(pos_ptr + t).to(tl.int64)
    if h < HEADS + KV_HEADS:
        swapped = tl.load(src + (offs + D // 2) % D).to(tl.float32)
        x = x * tl.load(cos_ptr + pos * D + offs).to(tl.float32) + swapped * tl.load(sin_ptr + pos * D + offs).to(
            tl.float32)
    if h < HEADS:
        tl.store(q_ptr + (t.to(tl.int64) * HEADS + h) * D + offs, x.to(q_ptr.dtype.element_ty))
    elif h < HEADS + KV_HEADS:
        slot = (t.to(tl.int64) * KV_HEADS + h - HEADS) * max_len + pos
        tl.store(k_ptr + slot * D + offs, x.to(k_ptr.dtype.element_ty))
    else:
        slot = (t.to(tl.int64) * KV_HEADS + h - HEADS - KV_HEADS) * max_len + pos
        tl.store(v_ptr + slot * D + offs, x.to(v_ptr.dtype.element_ty))


def rope_kv_write(qkv: torch.Tensor, positions: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                  k_cache: torch.Tensor, v_cache: torch.Tensor, heads: int) -> torch.Tensor:
    """Rotated query heads (tokens, heads, head_dim); K (rotated) and V of token t written into
    ``k_cache``/``v_cache`` (rows >= tokens, kv_heads, max_len, head_dim) at [t, :, positions[t]]."""
    rows, kv_heads, max_len, dim = k_cache.shape
    tokens = qkv.shape[0]
    if qkv.shape[1] != (heads + 2 * kv_heads) * dim or rows < tokens or not (qkv.is_contiguous() and
                                                                              k_cache.is_contiguous()):
        raise ValueError(f"rope_kv_write: qkv {tuple(qkv.shape)}, cache {tuple(k_cache.shape)}, {heads} heads")
    q = torch.empty(tokens, heads, dim, device=qkv.device, dtype=qkv.dtype)
    _rope_write[(tokens, heads + 2 * kv_heads)](qkv, positions, cos, sin, q, k_cache, v_cache, max_len, HEADS=heads,
                                                KV_HEADS=kv_heads, D=dim, num_warps=1)
    return q
