"""Decode attention in Triton: split-KV (flash-decoding) over a contiguous cache and over a paged one.

Queries (rows, kv_heads, groups, dim): the query heads sharing one K/V head (GQA) are the rows of
one small attention, padded to G_PAD. A program takes one (row, K/V head) and one slice of its keys,
keeps an online softmax over BLOCK_N keys at a time (both products on the tensor cores) and writes
the normalized output (one slice) or its unnormalized output, max and sum, which ``_merge`` weighs
by exp2(m_slice - m_max). Contiguous cache: the kit's dense layout, (rows, kv_heads, context, dim).
Paged: the kit's PagedKVCache layout, a pool (pages, kv_heads, page_size, dim), a block table
(rows, max_pages) and row lengths; a tile's pages come from the table, keys past the row's length
are masked, and slices past it write an empty partial (max -inf, sum 0).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

BLOCK_N = 64
"""Keys per inner step: 64 x 128 bf16 = 16 KB of K and 16 KB of V."""
G_PAD = 16
"""Query rows per program, padded to the tensor-core tile's minimum height."""
STAGES = 4  # K/V tile loads in flight per program: 4 x 32 KB of shared memory


@triton.jit
def _online(q, k, v, valid, m, total, acc, qk_scale):
    """One tile of keys into the running (max, sum, acc); scores in log2 units, invalid keys -inf."""
    s = tl.where(valid[None, :], tl.dot(q, tl.trans(k)) * qk_scale, float("-inf"))
    m_new = tl.maximum(m, tl.max(s, 1))
    alpha = tl.exp2(m - m_new)  # 0 for the first tile (m = -inf), then <= 1
    p = tl.exp2(s - m_new[:, None])
    return m_new, total * alpha + tl.sum(p, 1), tl.dot(p.to(v.dtype), v, acc * alpha[:, None])


@triton.jit
def _finish(o_ptr, ml_ptr, out_ptr, acc, m, total, bh, split, splits, GROUPS: tl.constexpr, G_PAD: tl.constexpr,
            D: tl.constexpr, FINAL: tl.constexpr):
    """Writes the program's GROUPS query rows: normalized into ``out`` (FINAL), else as a partial."""
    offs_g, offs_d = tl.arange(0, G_PAD), tl.arange(0, D)
    keep = offs_g < GROUPS
    if FINAL:
        out = (acc / total[:, None]).to(out_ptr.dtype.element_ty)
        tl.store(out_ptr + (bh * GROUPS + offs_g[:, None]) * D + offs_d[None, :], out, mask=keep[:, None])
    else:
        part = (bh * splits + split) * GROUPS + offs_g
        tl.store(o_ptr + part[:, None] * D + offs_d[None, :], acc, mask=keep[:, None])
        tl.store(ml_ptr + part * 2, m, mask=keep)
        tl.store(ml_ptr + part * 2 + 1, total, mask=keep)


@triton.jit
def _contiguous(q_ptr, k_ptr, v_ptr, o_ptr, ml_ptr, out_ptr, ctx, qk_scale, SPLIT_LEN: tl.constexpr,
                GROUPS: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr, FINAL: tl.constexpr):
    """Program (row * kv_heads + head, split): keys [split * SPLIT_LEN, + SPLIT_LEN) of a contiguous cache."""
    bh, split = tl.program_id(0), tl.program_id(1)
    offs_g, offs_d, offs_n = tl.arange(0, G_PAD), tl.arange(0, D), tl.arange(0, BLOCK_N)
    q = tl.load(q_ptr + (bh * GROUPS + offs_g[:, None]) * D + offs_d[None, :], mask=offs_g[:, None] < GROUPS, other=0.0)
    m = tl.full((G_PAD,), float("-inf"), tl.float32)
    total = tl.zeros((G_PAD,), tl.float32)
    acc = tl.zeros((G_PAD, D), tl.float32)
    first = (bh.to(tl.int64) * ctx + split * SPLIT_LEN) * D
    for n in range(0, SPLIT_LEN, BLOCK_N):
        offs = first + (n + offs_n)[:, None] * D + offs_d[None, :]
        m, total, acc = _online(q, tl.load(k_ptr + offs), tl.load(v_ptr + offs), offs_n >= 0, m, total, acc, qk_scale)
    _finish(o_ptr, ml_ptr, out_ptr, acc, m, total, bh, split, tl.num_programs(1), GROUPS, G_PAD, D, FINAL)


@triton.jit
def _paged(q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, o_ptr, ml_ptr, max_pages, qk_scale, SPLIT_LEN: tl.constexpr,
           KV_HEADS: tl.constexpr, PAGE: tl.constexpr, GROUPS: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr,
           BLOCK_N: tl.constexpr):
    """Program (row * KV_HEADS + head, split): keys [split * SPLIT_LEN, + SPLIT_LEN) of the row, via its block table."""
    bh, split = tl.program_id(0), tl.program_id(1)
    row, head = bh // KV_HEADS, bh % KV_HEADS
    offs_g, offs_d, offs_n = tl.arange(0, G_PAD), tl.arange(0, D), tl.arange(0, BLOCK_N)
    q = tl.load(q_ptr + (bh * GROUPS + offs_g[:, None]) * D + offs_d[None, :], mask=offs_g[:, None] < GROUPS, other=0.0)
    m = tl.full((G_PAD,), float("-inf"), tl.float32)
    total = tl.zeros((G_PAD,), tl.float32)
    acc = tl.zeros((G_PAD, D), tl.float32)
    length = tl.load(lens_ptr + row)
    start = split * SPLIT_LEN
    for n in range(start, tl.minimum(start + SPLIT_LEN, length), BLOCK_N):
        keys = n + offs_n
        valid = keys < length
        page = tl.load(table_ptr + row.to(tl.int64) * max_pages + keys // PAGE, mask=valid, other=0)
        offs = ((page * KV_HEADS + head) * PAGE + keys % PAGE)[:, None] * D + offs_d[None, :]
        k = tl.load(k_ptr + offs, mask=valid[:, None], other=0.0)
        v = tl.load(v_ptr + offs, mask=valid[:, None], other=0.0)
        m, total, acc = _online(q, k, v, valid, m, total, acc, qk_scale)
    _finish(o_ptr, ml_ptr, o_ptr, acc, m, total, bh, split, tl.num_programs(1), GROUPS, G_PAD, D, False)


@triton.jit
def _merge(o_ptr, ml_ptr, out_ptr, SPLITS: tl.constexpr, GROUPS: tl.constexpr, D: tl.constexpr):
    """Program (row * kv_heads + head) * GROUPS + g: the slices' partials weighed by exp2(m - max m)."""
    pid = tl.program_id(0)
    bh, g = pid // GROUPS, pid % GROUPS
    offs_s, offs_d = tl.arange(0, SPLITS), tl.arange(0, D)
    part = (bh * SPLITS + offs_s) * GROUPS + g
    m, total = tl.load(ml_ptr + part * 2), tl.load(ml_ptr + part * 2 + 1)
    w = tl.exp2(m - tl.max(m, 0))
    acc = tl.load(o_ptr + part[:, None] * D + offs_d[None, :])
    out = tl.sum(acc * w[:, None], 0) / tl.sum(total * w, 0)
    tl.store(out_ptr + pid * D + offs_d, out.to(out_ptr.dtype.element_ty))


def _partials(q: torch.Tensor, splits: int) -> tuple[torch.Tensor, torch.Tensor]:
    n = q.shape[0] * q.shape[1] * q.shape[2] * splits
    return torch.empty(n, q.shape[3], device=q.device, dtype=torch.float32), q.new_empty(n, 2, dtype=torch.float32)


def _merged(parts: torch.Tensor, ml: torch.Tensor, out: torch.Tensor, splits: int) -> torch.Tensor:
    rows, heads, groups, dim = out.shape
    _merge[(rows * heads * groups,)](parts, ml, out, SPLITS=splits, GROUPS=groups, D=dim, num_warps=4)
    return out


def decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, splits: int) -> torch.Tensor:
    """softmax(q k^T / sqrt(dim)) v for q (rows, kv_heads, groups, dim), k/v (rows, kv_heads, context, dim);
    ``splits`` (a power of two) slices of the context, each a multiple of BLOCK_N; 1: one program
    per (row, K/V head) over the whole context, normalized in place (no merge)."""
    (rows, heads, groups, dim), ctx = q.shape, k.shape[2]
    if groups > G_PAD or ctx % (splits * BLOCK_N) or splits & (splits - 1) or not (q.is_contiguous() and k.is_contiguous()):
        raise ValueError(f"decode_attention: q {tuple(q.shape)}, context {ctx}, {splits} splits")
    out = torch.empty_like(q)
    parts, ml = _partials(q, splits) if splits > 1 else (out, out)
    _contiguous[(rows * heads, splits)](q, k, v, parts, ml, out, ctx, math.log2(math.e) / dim**0.5,
                                       SPLIT_LEN=ctx // splits, GROUPS=groups, G_PAD=G_PAD, D=dim, BLOCK_N=BLOCK_N,
                                       FINAL=splits == 1, num_warps=4, num_stages=STAGES)
    return _merged(parts, ml, out, splits) if splits > 1 else out


def paged_decode_attention(q: torch.Tensor, k_pool: torch.Tensor, v_pool: torch.Tensor, table: torch.Tensor,
                           lens: torch.Tensor, split_len: int = 1024) -> torch.Tensor:
    """As :func:`decode_attention` for row i's first ``lens[i]`` keys, stored in pool pages
    ``table[i, 0], table[i, 1], ...`` of k_pool/v_pool (pages, kv_heads, page_size, dim);
    ``split_len`` keys per program (a multiple of BLOCK_N; BLOCK_N a multiple of the page size)."""
    (rows, heads, groups, dim), page = q.shape, k_pool.shape[2]
    if groups > G_PAD or split_len % BLOCK_N or BLOCK_N % page or not (q.is_contiguous() and k_pool.is_contiguous()):
        raise ValueError(f"paged_decode_attention: q {tuple(q.shape)}, page {page}, split_len {split_len}")
    splits = triton.next_power_of_2(triton.cdiv(table.shape[1] * page, split_len))
    parts, ml = _partials(q, splits)
    _paged[(rows * heads, splits)](q, k_pool, v_pool, table, lens, parts, ml, table.shape[1],
                                   math.log2(math.e) / dim**0.5, SPLIT_LEN=split_len, KV_HEADS=heads, PAGE=page,
                                   GROUPS=groups, G_PAD=G_PAD, D=dim, BLOCK_N=BLOCK_N, num_warps=4, num_stages=STAGES)
    return _merged(parts, ml, torch.empty_like(q), splits)
