"""The decode step of ``fp8_weight_decode``'s ``_fused`` variant: the kit decoder's step (embedding,
RMSNorm, QKV, RoPE, cache write, masked GQA attention, output, SwiGLU, head, top-k, token feedback)
as 21 kernels instead of ~75, the fp8 GEMVs (``ch16_fp8_gemv``) with four Triton kernels around them:

* ``_add_norm`` (a program per row): the split-K sum of the output or down projection, its scale,
  the residual add and the next RMSNorm in one pass (the first one gathers the embedding rows);
* ``_rope_cache`` (a program per row and head): the QKV split-K sum and scale, RoPE on the query
  and key heads (angles from the position in registers: no tables), the new key and value stored
  in the cache at the row's position, the rotated query to a buffer (no mask, slot or table kernels);
* ``_attend``: flash-decoding over the cache up to each row's position (the mask is the loop's
  bound: no additive mask), ``ch16_fp8_kv._combine`` merging the slices;
* ``_top_feedback`` (a program per row): the TOP largest logits, the greedy token, and the step's
  feedback (``tok`` <- token, ``pos`` += 1) in one kernel (no topk, cast and four copy kernels).
SwiGLU runs in the down projection's x load (``GLU``). Intermediate values round to the
activations' dtype where the eager step rounds them, so both steps compute the same thing.
"""

from __future__ import annotations

import triton
import triton.language as tl
from ch16_fp8_kv import _pdl_enter

SPLIT_LEN, BLOCK_KEYS = 128, 64
"""Keys per attention program (a context slice) and per inner step."""


@triton.jit
def _add_norm(p_ptr, s_ptr, x_ptr, tok_ptr, w_ptr, xo_ptr, xn_ptr, MN, N, eps, SPLITS: tl.constexpr,
              EMBED: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr = False):
    """Row r: x = EMBED ? table[tok[r]] : x[r] + round(scale * sum of SPLITS partials); xo[r] = x;
    xn[r] = RMSNorm(x) * w (``PDL``: ``_pdl_enter``, w loaded before its wait)."""
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    inside = offs < N
    w = _pdl_enter(PDL, w_ptr, offs, inside)
    if EMBED:
        x = tl.load(x_ptr + tl.load(tok_ptr + row) * N + offs, mask=inside, other=0.0).to(tl.float32)
    else:
        acc = tl.zeros((BLOCK,), tl.float32)
        for split in tl.static_range(SPLITS):
            acc += tl.load(p_ptr + split * MN + row * N + offs, mask=inside, other=0.0)
        y = (acc * tl.load(s_ptr + offs, mask=inside, other=0.0)).to(xo_ptr.dtype.element_ty).to(tl.float32)
        x = (tl.load(x_ptr + row * N + offs, mask=inside, other=0.0).to(tl.float32) + y)
        x = x.to(xo_ptr.dtype.element_ty).to(tl.float32)
    _store_norm(x, w_ptr, xo_ptr, xn_ptr, row, offs, inside, N, eps, w)


@triton.jit
def _store_norm(x, w_ptr, xo_ptr, xn_ptr, row, offs, inside, N, eps, w=None):
    """xo[row] = x (fp32, rounded already); xn[row] = RMSNorm(x) * w (``w``: w_ptr's, if loaded already)."""
    tl.store(xo_ptr + row * N + offs, x.to(xo_ptr.dtype.element_ty), mask=inside)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, 0) / N + eps)
    xn = x * rstd * (tl.load(w_ptr + offs, mask=inside, other=0.0) if w is None else w).to(tl.float32)
    tl.store(xn_ptr + row * N + offs, xn.to(xn_ptr.dtype.element_ty), mask=inside)


@triton.jit
def _rope_cache(p_ptr, s_ptr, pos_ptr, q_ptr, k_ptr, v_ptr, MN, N, max_len, log2_base, SPLITS: tl.constexpr,
                HEADS: tl.constexpr, KV_HEADS: tl.constexpr, D: tl.constexpr, PDL: tl.constexpr = False):
    """Program (row, head) of the QKV output (HEADS query, KV_HEADS key, KV_HEADS value heads):
    summed, scaled, rounded; query and key heads rotated (x * cos + (second, first half) * signed
    sin, as ``aisp.kits.llm.rope.rotate_`` in the activations' dtype); queries to q (rows, HEADS, D),
    keys and values to the cache (rows, KV_HEADS, max_len, D) at the row's position."""
    _pdl_enter(PDL)
    row, head = tl.program_id(0), tl.program_id(1)
    half: tl.constexpr = D // 2
    offs = tl.arange(0, D)
    swap = (offs + half) % D
    dt = q_ptr.dtype.element_ty
    acc, acc_sw = tl.zeros((D,), tl.float32), tl.zeros((D,), tl.float32)
    for split in tl.static_range(SPLITS):
        acc += tl.load(p_ptr + split * MN + row * N + head * D + offs)
        acc_sw += tl.load(p_ptr + split * MN + row * N + head * D + swap)
    x = (acc * tl.load(s_ptr + head * D + offs)).to(dt).to(tl.float32)
    x_sw = (acc_sw * tl.load(s_ptr + head * D + swap)).to(dt).to(tl.float32)
    pos = tl.load(pos_ptr + row)
    if head < HEADS + KV_HEADS:
        angle = pos.to(tl.float32) * tl.exp2(-(offs % half).to(tl.float32) / half * log2_base)
        angle -= 6.283185307179586 * tl.floor(angle / 6.283185307179586 + 0.5)  # into [-pi, pi]
        cos = tl.cos(angle).to(dt).to(tl.float32)
        sin = tl.where(offs < half, -tl.sin(angle), tl.sin(angle)).to(dt).to(tl.float32)
        x = ((x * cos).to(dt).to(tl.float32) + x_sw * sin).to(dt).to(tl.float32)
    if head < HEADS:
        tl.store(q_ptr + (row * HEADS + head) * D + offs, x.to(dt))
    else:
        kv = (head - HEADS) % KV_HEADS
        slot = ((row * KV_HEADS + kv) * max_len + pos) * D + offs
        live = offs * 0 + pos < max_len
        if head < HEADS + KV_HEADS:
            tl.store(k_ptr + slot, x.to(k_ptr.dtype.element_ty), mask=live)
        else:
            tl.store(v_ptr + slot, x.to(v_ptr.dtype.element_ty), mask=live)


@triton.jit
def _attend(q_ptr, k_ptr, v_ptr, pos_ptr, o_ptr, ml_ptr, max_len, qk_scale, KV_HEADS: tl.constexpr,
            GROUPS: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr, SPLIT_LEN: tl.constexpr,
            BLOCK_N: tl.constexpr, PDL: tl.constexpr = False):
    """Program (row * KV_HEADS + head, slice): ``ch16_fp8_kv._attend`` (products in fp16) over the
    slice's keys at or before the row's position (none: max -inf, sum 0, for ``_combine``)."""
    _pdl_enter(PDL)
    bh, split, splits = tl.program_id(0), tl.program_id(1), tl.num_programs(1)
    offs_g, offs_d = tl.arange(0, G_PAD), tl.arange(0, D)
    q = tl.load(q_ptr + (bh * GROUPS + offs_g[:, None]) * D + offs_d[None, :], mask=offs_g[:, None] < GROUPS,
                other=0.0)
    q = (q.to(tl.float32) * qk_scale).to(tl.float16)
    m = tl.full((G_PAD,), float("-inf"), tl.float32)
    total = tl.zeros((G_PAD,), tl.float32)
    acc = tl.zeros((G_PAD, D), tl.float32)
    end = tl.minimum(tl.load(pos_ptr + bh // KV_HEADS) + 1, tl.minimum((split + 1) * SPLIT_LEN, max_len))
    base = bh.to(tl.int64) * max_len * D
    for n in range(split * SPLIT_LEN, end, BLOCK_N):
        keys = n + tl.arange(0, BLOCK_N)
        live = keys < end
        offs = base + keys[:, None] * D + offs_d[None, :]
        s = tl.dot(q, tl.trans(tl.load(k_ptr + offs, mask=live[:, None], other=0.0).to(tl.float16)))
        s = tl.where(live[None, :], s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        alpha = tl.exp2(m - m_new)
        p = tl.exp2(s - m_new[:, None])
        total = total * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + offs, mask=live[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v.to(tl.float16))
        m = m_new
    part = (bh * splits + split) * GROUPS + offs_g
    real = offs_g < GROUPS
    tl.store(o_ptr + part[:, None] * D + offs_d[None, :], acc, mask=real[:, None])
    tl.store(ml_ptr + part * 2, m, mask=real)
    tl.store(ml_ptr + part * 2 + 1, total, mask=real)


@triton.jit
def _top_feedback(logits_ptr, top_ptr, next_ptr, tok_ptr, pos_ptr, V, TOP: tl.constexpr, BLOCK: tl.constexpr):
    """Row r: its TOP largest logits (descending, fp32) and the greedy token (the lowest index of
    the largest); next[r] = tok[r] = token, pos[r] += 1."""
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(logits_ptr + row * V + offs, mask=offs < V, other=float("-inf")).to(tl.float32)
    for i in tl.static_range(TOP):
        best = tl.max(x, 0)
        at = tl.min(tl.where(x == best, offs, BLOCK), 0)
        tl.store(top_ptr + row * TOP + i, best)
        if i == 0:
            tl.store(next_ptr + row, at.to(next_ptr.dtype.element_ty))
            tl.store(tok_ptr + row, at.to(tok_ptr.dtype.element_ty))
        x = tl.where(offs == at, float("-inf"), x)
    tl.store(pos_ptr + row, tl.load(pos_ptr + row) + 1)

