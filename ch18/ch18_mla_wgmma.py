"""MLA decode's latent attention with the tokens as the products' tall side: Hopper's wgmma, q read once a tile.

``ch18_mla_kernel._slice`` multiplies with the 16 heads as the tile's rows (``mma.sync``, 16 x 8 tiles,
warps splitting the keys): every warp then reads the whole (16, 576) query from shared memory at every
tile as its A operand (4 warps x 18 KB a 32-row tile, 2x the tile's own 36 KB), and that shared-memory
traffic, not DRAM, is what its stalls show (short_scoreboard, wait; Nsight Compute, H200). Here the
scores are transposed, so the cache tile is the tall operand: ``s^T = c q_lat^T + k_rope q_rope^T``
(BLOCK_N x 16; with BLOCK_N = 64 a wgmma, M = 64 rows a warpgroup, N = 16 heads: the tensor cores read
the tile and the query from shared memory once a warpgroup, no per-warp copies in registers). The
output stays (16, 512), ``acc += p^T c``: written transposed (``acc^T += c^T p^T``, 512 x 16), Triton
3.6's H200 code gave wrong output (relative L2 4.5 against ``_slice`` even with plain loads for the
TMA copy; the CPU interpreter agreed with ``_slice``), and out-of-bounds accesses at the pair's size.
Loads: the tile's 512 latent columns by ONE TMA copy (64 x 1 KB rows, 64 KB) straight into shared
memory (no registers), rows past the context zero-filled by the 3-D descriptor; its 64 RoPE columns
(8 KB) by plain loads one tile ahead. At ``stages`` 1 (the default) a program waits for each copy, but
it takes 92 KB of shared memory and 184 registers (sm_90 compile, Triton 3.6, 4 warps): TWO programs an
SM, each with a 64 KB copy in flight while the other multiplies (_slice: 2 x 36 KB). At 2 stages the
compile keeps 92 KB but takes 244 registers, one program an SM (measured slower: a step 0.118 ms at 4 slices).
The measured result (H200): 0.106 ms a step in the pair against ``_graph``'s 0.110; the kernel and merge
alone (do_bench) 90.9 us against ``_slice``'s 92.8, 3.32 TB/s, 79% of HBM copy: the transposed scores save 2%.
Same partial layout and merge (``ch18_decode._merge``) as ``_slice``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import triton
import triton.language as tl
from ch18_mla_kernel import H_PAD, merged, partials
from triton.tools.tensor_descriptor import TensorDescriptor


class TokenConfig(NamedTuple):
    """``_slice_t``'s launch settings: cache rows a step (64: wgmma's M), pipelining depth, warps."""

    block_n: int = 64
    stages: int = 1
    warps: int = 4


TOKENS = TokenConfig()
"""64 rows, no software pipeline (two programs an SM), 4 warps: the best of ``kernel_sweep.py mla_wgmma``
(H200, 2026-11-29, whole steps: 0.104 ms; ``_slice``'s 0.107; 8 warps 0.161, 2 stages at 4 slices 0.118)."""


@triton.jit
def _slice_t(q_ptr, c_desc, cache_ptr, o_ptr, ml_ptr, ctx, qk_scale, SPLIT_LEN: tl.constexpr, HEADS: tl.constexpr,
             H_PAD: tl.constexpr, LATENT: tl.constexpr, ROPE: tl.constexpr, BLOCK_N: tl.constexpr):
    """Program (sequence, split): cache rows [split * SPLIT_LEN, + SPLIT_LEN), each read once; the
    scores and the output kept transposed (keys / latent columns as rows, heads as columns)."""
    seq, split = tl.program_id(0), tl.program_id(1)
    offs_h, offs_l, offs_r, offs_n = tl.arange(0, H_PAD), tl.arange(0, LATENT), tl.arange(0, ROPE), tl.arange(0, BLOCK_N)
    width: tl.constexpr = LATENT + ROPE
    heads = offs_h < HEADS
    q_cols = q_ptr + (seq * HEADS + offs_h[None, :]) * width  # q^T: (dims, heads)
    q_lat_t = tl.load(q_cols + offs_l[:, None], mask=heads[None, :], other=0.0)
    q_rope_t = tl.load(q_cols + LATENT + offs_r[:, None], mask=heads[None, :], other=0.0)
    m = tl.full((H_PAD,), float("-inf"), tl.float32)
    total = tl.zeros((H_PAD,), tl.float32)
    acc = tl.zeros((H_PAD, LATENT), tl.float32)
    rope_rows = cache_ptr + seq.to(tl.int64) * ctx * width + LATENT + offs_r[None, :]
    start = split * SPLIT_LEN
    end = tl.minimum(start + SPLIT_LEN, ctx)
    keys = start + offs_n
    k_rope = tl.load(rope_rows + keys[:, None] * width, mask=(keys < end)[:, None], other=0.0)
    for n in range(start, end, BLOCK_N):  # every tile holds a valid row
        valid = n + offs_n < ctx
        ahead = n + BLOCK_N + offs_n  # the next tile's RoPE keys, in flight while this tile's c copies and multiplies
        k_rope_next = tl.load(rope_rows + ahead[:, None] * width, mask=(ahead < end)[:, None], other=0.0)
        c = c_desc.load([seq, n, 0]).reshape(BLOCK_N, LATENT)  # one TMA copy; rows past ctx read as 0
        s = tl.dot(k_rope, q_rope_t, tl.dot(c, q_lat_t))  # (BLOCK_N, H_PAD)
        s = tl.where(valid[:, None], s * qk_scale, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 0))
        alpha = tl.exp2(m - m_new)  # 0 for the first tile (m = -inf), then <= 1
        p = tl.exp2(s - m_new[None, :])
        total = total * alpha + tl.sum(p, 0)
        acc = tl.dot(tl.trans(p.to(c.dtype)), c, acc * alpha[:, None])
        m, k_rope = m_new, k_rope_next
    part = (seq * tl.num_programs(1) + split) * HEADS + offs_h
    tl.store(o_ptr + part[:, None] * LATENT + offs_l[None, :], acc, mask=heads[:, None])
    tl.store(ml_ptr + part * 2, m, mask=heads)  # an empty slice: max -inf, sum 0, acc 0
    tl.store(ml_ptr + part * 2 + 1, total, mask=heads)


def latent_attention_t(q: torch.Tensor, cache: torch.Tensor, rope: int, scale: float, splits: int,
                       config: TokenConfig = TOKENS) -> torch.Tensor:
    """``ch18_mla_kernel.latent_attention``'s contract (q (batch, heads, latent + rope), cache (batch,
    context, latent + rope), ``splits`` a power of two) computed by ``_slice_t``; (batch, heads, latent)."""
    block_n, stages, warps = config
    parts, ml, split_len = partials(q, cache, rope, splits, block_n, "latent_attention_t")
    batch, heads, latent = q.shape[0], q.shape[1], q.shape[2] - rope
    c_desc = TensorDescriptor.from_tensor(cache, [1, block_n, latent])  # the latent columns, BLOCK_N rows a copy
    _slice_t[(batch, splits)](q, c_desc, cache, parts, ml, cache.shape[1], scale * math.log2(math.e),
                              SPLIT_LEN=split_len, HEADS=heads, H_PAD=H_PAD, LATENT=latent, ROPE=rope,
                              BLOCK_N=block_n, num_warps=warps, num_stages=stages)
    return merged(q, parts, ml, latent, splits, 4)
