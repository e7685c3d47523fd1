"""The batched decode step's attention and top-k as Triton kernels, registered ops (opaque to
torch.compile, capturable in a CUDA graph); on a CPU without TRITON_INTERPRET=1, PyTorch references.

``ch17::decode_attend``: one program per (row, K/V head) of a decode step (one new token a row, the
cache rows = the batch rows): it takes the GROUPS query heads of its K/V head as the rows of one
small attention (padded to G_PAD, both products on tensor cores), starts the online softmax with
the new key and value (registers), streams the row's cached keys 0..pos-1 in BLOCK_N-key tiles
and stores the new key and value at slot pos, which no other program reads: no mask, no write kernels.
``ch17::top_logits``: ``greedy_top`` in two kernels: the k largest of every TOP_BLOCK-logit chunk (k
rounds of max-and-drop in registers), then of a row's candidates (its k largest are among them).
"""

from __future__ import annotations

import math
import os

import torch
import triton
import triton.language as tl

from aisp.kits.llm import greedy_top

BLOCK_N = 64
"""Cached keys per step: 64 x 128 bf16, 16 KB of K and 16 KB of V."""
G_PAD = 16
"""Query rows per program (a K/V head's query heads), padded to the tensor-core tile's least height."""
STAGES = 4
"""K/V tiles in flight per program (4 x 32 KB of shared memory: two programs an SM)."""
TOP_BLOCK = 1024
"""Logits per program in the first round of top-k (32,000: 32 chunks a row, 2,048 programs)."""
INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"  # the Triton kernels on CPU tensors


@triton.jit
def decode_attend_kernel(q_ptr, k_ptr, v_ptr, ck_ptr, cv_ptr, pos_ptr, out_ptr, layer, rows, max_len, q_row, k_row,
                         v_row, pos_row, qk_scale, KV_HEADS: tl.constexpr, GROUPS: tl.constexpr, G_PAD: tl.constexpr,
                         D: tl.constexpr, BLOCK_N: tl.constexpr):
    """Program b * KV_HEADS + h: q (b, heads, D), new k/v (b, KV_HEADS, D), their last dims contiguous;
    caches (layers, rows, KV_HEADS, max_len, D) contiguous; out (b, heads * D)."""
    bh = tl.program_id(0)
    b, h = bh // KV_HEADS, bh % KV_HEADS
    g, d, n = tl.arange(0, G_PAD), tl.arange(0, D), tl.arange(0, BLOCK_N)
    live = g < GROUPS
    q = tl.load(q_ptr + b * q_row + (h * GROUPS + g)[:, None] * D + d[None, :], mask=live[:, None], other=0.0)
    k_new = tl.load(k_ptr + b * k_row + h * D + d)
    v_new = tl.load(v_ptr + b * v_row + h * D + d)
    pos = tl.load(pos_ptr + b * pos_row)
    base = ((layer * rows + b) * KV_HEADS + h).to(tl.int64) * max_len * D
    m = tl.sum(q.to(tl.float32) * k_new.to(tl.float32)[None, :], 1) * qk_scale  # the new key starts the max
    total = tl.full((G_PAD,), 1.0, tl.float32)
    acc = tl.zeros((G_PAD, D), tl.float32) + v_new.to(tl.float32)[None, :]
    for start in range(0, pos, BLOCK_N):
        keys = start + n
        valid = keys < pos
        at = base + keys[:, None] * D + d[None, :]
        k = tl.load(ck_ptr + at, mask=valid[:, None], other=0.0)
        v = tl.load(cv_ptr + at, mask=valid[:, None], other=0.0)
        s = tl.where(valid[None, :], tl.dot(q, tl.trans(k)) * qk_scale, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        alpha = tl.exp2(m - m_new)
        p = tl.exp2(s - m_new[:, None])
        total = total * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m = m_new
    tl.store(ck_ptr + base + pos * D + d, k_new)
    tl.store(cv_ptr + base + pos * D + d, v_new)
    out = (acc / total[:, None]).to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + (bh * GROUPS + g)[:, None] * D + d[None, :], out, mask=live[:, None])


def _decode_attend(cache_k: torch.Tensor, cache_v: torch.Tensor, layer: int, positions: torch.Tensor,
                   q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Writes k, v (batch, kv_heads, dim) at slot positions[i] (batch, 1) of row i of caches (layers, rows,
    kv_heads, max_len, dim); returns q's (batch, heads, dim) attention over keys 0..positions[i] (GQA)."""
    (batch, heads, dim), kv_heads = q.shape, k.shape[1]
    if not (q.is_cuda or INTERPRET):
        index = torch.arange(batch, device=q.device)[:, None], torch.arange(kv_heads, device=q.device), positions
        cache_k[layer].index_put_(index, k)
        cache_v[layer].index_put_(index, v)
        seen = torch.arange(cache_k.shape[3], device=q.device) <= positions  # (batch, max_len)
        out = torch.nn.functional.scaled_dot_product_attention(
            q.view(batch, kv_heads, heads // kv_heads, dim), cache_k[layer, :batch], cache_v[layer, :batch],
            attn_mask=seen[:, None, None])
        return out.reshape(batch, heads * dim)
    q, k, v = (t if t.stride(-1) == 1 and t.stride(-2) == dim else t.contiguous() for t in (q, k, v))
    if heads // kv_heads > G_PAD or not cache_k.is_contiguous() or cache_k.stride() != cache_v.stride():
        raise ValueError(f"decode_attend: {heads} heads on {kv_heads}, caches {tuple(cache_k.stride())}")
    out = q.new_empty(batch, heads * dim)
    decode_attend_kernel[(batch * kv_heads,)](
        q, k, v, cache_k, cache_v, positions, out, layer, cache_k.shape[1], cache_k.shape[3], q.stride(0), k.stride(0),
        v.stride(0), positions.stride(0), math.log2(math.e) / dim ** 0.5, KV_HEADS=kv_heads, GROUPS=heads // kv_heads,
        G_PAD=G_PAD, D=dim, BLOCK_N=BLOCK_N, num_warps=4, num_stages=STAGES)
    return out


@triton.jit
def chunk_top_kernel(x_ptr, val_ptr, idx_ptr, vocab, x_row, K: tl.constexpr, BLOCK: tl.constexpr):
    """Program (row, chunk): the K largest of logits [chunk * BLOCK, + BLOCK) of the row, with their columns."""
    row, chunk = tl.program_id(0), tl.program_id(1)
    offs = tl.arange(0, BLOCK)
    cols = chunk * BLOCK + offs
    x = tl.load(x_ptr + row.to(tl.int64) * x_row + cols, mask=cols < vocab, other=float("-inf")).to(tl.float32)
    out = (row * tl.num_programs(1) + chunk) * K
    for j in tl.static_range(K):
        best, at = tl.max(x, 0, return_indices=True)
        tl.store(val_ptr + out + j, best)
        tl.store(idx_ptr + out + j, chunk * BLOCK + at)
        x = tl.where(offs == at, float("-inf"), x)


@triton.jit
def row_top_kernel(val_ptr, idx_ptr, top_ptr, token_ptr, n, K: tl.constexpr, BLOCK: tl.constexpr):
    """Program row: the K largest of its n candidates, in order, and the column of the largest."""
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(val_ptr + row * n + offs, mask=offs < n, other=float("-inf"))
    for j in tl.static_range(K):
        best, at = tl.max(x, 0, return_indices=True)
        tl.store(top_ptr + row * K + j, best)
        if j == 0:
            tl.store(token_ptr + row, tl.load(idx_ptr + row * n + at))
        x = tl.where(offs == at, float("-inf"), x)


def _top_logits(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``greedy_top(logits, k)``: the largest logit's column (rows,) and the k largest (rows, k), fp32."""
    if not (logits.is_cuda or INTERPRET):
        token, top = greedy_top(logits, k)
        return token.contiguous(), top.contiguous()
    logits, (rows, vocab) = logits if logits.stride(-1) == 1 else logits.contiguous(), logits.shape
    block = min(TOP_BLOCK, triton.next_power_of_2(vocab))
    chunks = triton.cdiv(vocab, block)
    values = logits.new_empty(rows, chunks * k, dtype=torch.float32)
    columns = logits.new_empty(rows, chunks * k, dtype=torch.int64)
    chunk_top_kernel[(rows, chunks)](logits, values, columns, vocab, logits.stride(0), K=k, BLOCK=block, num_warps=4)
    top, token = logits.new_empty(rows, k, dtype=torch.float32), logits.new_empty(rows, dtype=torch.int64)
    row_top_kernel[(rows,)](values, columns, top, token, chunks * k, K=k, BLOCK=triton.next_power_of_2(chunks * k))
    return token, top


if not hasattr(torch.ops.ch17, "decode_attend"):  # a second import of this file registers nothing
    torch.library.custom_op("ch17::decode_attend", _decode_attend, mutates_args=("cache_k", "cache_v"))
    torch.library.register_fake("ch17::decode_attend", lambda cache_k, cache_v, layer, positions, q, k, v: q.new_empty(
        q.shape[0], q.shape[1] * q.shape[2]))
    torch.library.custom_op("ch17::top_logits", _top_logits, mutates_args=())
    torch.library.register_fake("ch17::top_logits", lambda logits, k: (
        logits.new_empty(logits.shape[0], dtype=torch.int64), logits.new_empty(logits.shape[0], k, dtype=torch.float32)))
decode_attend, top_logits = torch.ops.ch17.decode_attend, torch.ops.ch17.top_logits
