"""MLA decode's latent attention in Triton: one pass over the cache (FlashMLA-style split-KV).

After weight absorption every head attends to the same cache rows ``[c_kv | k_rope]`` (latent +
rope wide): a sequence's heads are the rows of one small attention (padded to H_PAD, the tensor
cores' minimum height) whose keys are the whole cache row and whose values are its latent columns.
A program takes one (sequence, slice of the context) and loads each BLOCK_N-row tile of the cache
ONCE, using it twice: scores ``q_lat . c + q_rope . k_rope`` (fp32, the scale folded into exp2),
an online softmax, then ``acc += P @ c`` from the same tile's latent columns. It writes its
unnormalized acc with its running max and sum, in the layout of ch18_decode's partials (a sequence's
heads are its query group), so ch18_decode's ``_merge`` weighs the slices by exp2(m - max m).
HBM bytes: the cache once, plus the (batch, splits, heads, latent) fp32 partials written and read
(at 32 x 16 slices of 16 heads x 512: 17 MB each way, ~11% of the 302 MB cache).
The kernel's query is built by ch18_mla_query.py (``absorbed_query``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import triton
import triton.language as tl
from ch18_decode import _merge

BLOCK_N = 32
"""Cache rows per inner step: 32 x 576 bf16 = 36 KB of tile."""
H_PAD = 16
"""Query rows (heads) per program, padded to the tensor-core tile's minimum height."""
STAGES = 3
"""Software-pipelining depth: the tile loads in flight (sm_90: 91 KB of shared memory, two programs an SM)."""
WARPS = 4


class SliceConfig(NamedTuple):
    """``_slice``'s launch settings: cache rows a step, pipelining depth, warps a program (and the merge's)."""

    block_n: int = BLOCK_N
    stages: int = STAGES
    warps: int = WARPS


SLICE = SliceConfig()
"""The settings measured on the H200 (2026-11-29): 91 KB of shared memory, two programs an SM."""


@triton.jit
def _slice(q_ptr, cache_ptr, o_ptr, ml_ptr, ctx, qk_scale, SPLIT_LEN: tl.constexpr, HEADS: tl.constexpr,
           H_PAD: tl.constexpr, LATENT: tl.constexpr, ROPE: tl.constexpr, BLOCK_N: tl.constexpr):
    """Program (sequence, split): cache rows [split * SPLIT_LEN, + SPLIT_LEN) of the sequence, each read once."""
    seq, split = tl.program_id(0), tl.program_id(1)
    offs_h, offs_l, offs_r, offs_n = tl.arange(0, H_PAD), tl.arange(0, LATENT), tl.arange(0, ROPE), tl.arange(0, BLOCK_N)
    width: tl.constexpr = LATENT + ROPE
    heads = offs_h[:, None] < HEADS
    q_rows = q_ptr + (seq * HEADS + offs_h[:, None]) * width
    q_lat = tl.load(q_rows + offs_l[None, :], mask=heads, other=0.0)
    q_rope = tl.load(q_rows + LATENT + offs_r[None, :], mask=heads, other=0.0)
    m = tl.full((H_PAD,), float("-inf"), tl.float32)
    total = tl.zeros((H_PAD,), tl.float32)
    acc = tl.zeros((H_PAD, LATENT), tl.float32)
    rows = cache_ptr + seq.to(tl.int64) * ctx * width
    start = split * SPLIT_LEN
    for n in range(start, tl.minimum(start + SPLIT_LEN, ctx), BLOCK_N):  # every tile holds a valid row
        keys = n + offs_n
        valid = keys < ctx
        tile = rows + keys[:, None] * width
        c = tl.load(tile + offs_l[None, :], mask=valid[:, None], other=0.0)  # (BLOCK_N, LATENT): keys and values
        k_rope = tl.load(tile + LATENT + offs_r[None, :], mask=valid[:, None], other=0.0)
        s = tl.dot(q_rope, tl.trans(k_rope), tl.dot(q_lat, tl.trans(c)))
        s = tl.where(valid[None, :], s * qk_scale, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        alpha = tl.exp2(m - m_new)  # 0 for the first tile (m = -inf), then <= 1
        p = tl.exp2(s - m_new[:, None])
        total = total * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(c.dtype), c, acc * alpha[:, None])
        m = m_new
    part = (seq * tl.num_programs(1) + split) * HEADS + offs_h
    tl.store(o_ptr + part[:, None] * LATENT + offs_l[None, :], acc, mask=heads)
    tl.store(ml_ptr + part * 2, m, mask=offs_h < HEADS)  # an empty slice: max -inf, sum 0, acc 0
    tl.store(ml_ptr + part * 2 + 1, total, mask=offs_h < HEADS)


def latent_attention(q: torch.Tensor, cache: torch.Tensor, rope: int, scale: float, splits: int,
                     config: SliceConfig = SLICE) -> torch.Tensor:
    """softmax(q cache^T * scale) cache[..., :latent] per sequence, for q (batch, heads, latent + rope)
    and cache (batch, context, latent + rope), latent and rope powers of two of at least 16;
    ``splits`` (a power of two) slices of the context, each a multiple of ``config.block_n`` (the last
    ones may be short or empty). Returns (batch, heads, latent) in q's dtype."""
    block_n, stages, warps = config
    parts, ml, split_len = partials(q, cache, rope, splits, block_n, "latent_attention")
    batch, heads, latent = q.shape[0], q.shape[1], q.shape[2] - rope
    _slice[(batch, splits)](q, cache, parts, ml, cache.shape[1], scale * math.log2(math.e), SPLIT_LEN=split_len,
                            HEADS=heads, H_PAD=H_PAD, LATENT=latent, ROPE=rope, BLOCK_N=block_n, num_warps=warps,
                            num_stages=stages)
    return merged(q, parts, ml, latent, splits, warps)


def partials(q: torch.Tensor, cache: torch.Tensor, rope: int, splits: int, block_n: int,
             name: str) -> tuple[torch.Tensor, torch.Tensor, int]:
    """The checked shapes' fp32 partials (acc; max and sum) of ``splits`` slices and the slice length
    (a multiple of ``block_n``); a ValueError naming ``name`` where the kernels do not apply."""
    (batch, heads, width), ctx = q.shape, cache.shape[1]
    latent = width - rope
    ok = heads <= H_PAD and splits & (splits - 1) == 0 and all(d >= 16 and d & (d - 1) == 0 for d in (latent, rope))
    if not (ok and q.is_contiguous() and cache.is_contiguous() and cache.shape[2] == width and cache.shape[0] == batch):
        raise ValueError(f"{name}: q {tuple(q.shape)}, cache {tuple(cache.shape)}, {splits} splits")
    split_len = triton.cdiv(triton.cdiv(ctx, splits), block_n) * block_n
    parts = torch.empty(batch * splits * heads, latent, device=q.device, dtype=torch.float32)
    return parts, torch.empty(batch * splits * heads, 2, device=q.device, dtype=torch.float32), split_len


def merged(q: torch.Tensor, parts: torch.Tensor, ml: torch.Tensor, latent: int, splits: int, warps: int) -> torch.Tensor:
    """The slices' partials merged (``ch18_decode._merge``) into (batch, heads, latent) in q's dtype."""
    out = q.new_empty(q.shape[0], q.shape[1], latent)
    _merge[(q.shape[0] * q.shape[1],)](parts, ml, out, SPLITS=splits, GROUPS=q.shape[1], D=latent, num_warps=warps)
    return out
