"""An MoE layer's routing after the router GEMM in three small Triton kernels, for chapter 17's grouped GEMM
(optimized_moe_grouped_gemm_fused_route.py): top-k of each token's logits with the softmax of the k, the
stable sort of the (token, slot) assignments by expert with the grouped GEMMs' tile schedule
(aisp/kits/moe_schedule.py's layout), and the sort's inverse, which the gather combine
(aisp/kits/moe_combine.py) reads.

Where ``aisp.kits.moe.route`` + ``device_route`` + the combine's ``sorted_rows`` take ~10 kernels (the logits'
fp32 copy, ``topk``'s two, the softmax, the counting sort's two, ``order.long()``, an ``arange`` and a
scatter; ~0.12 ms on an H200 by the ch17 README's profile, ``topk`` 0.056 ms and the sort 0.035 of it), here:
``_topk_count`` (a program's 32 tokens: 8 rounds of max, the lowest index among equal logits as ``torch.topk``
takes them, softmax, and the program's per-expert count of its 256 assignments), ``_scan`` (one program: each
expert's start row, each program's first row for each expert, the schedule) and ``_place`` (each assignment's
sorted row by its expert's running count: ``order[row] = assignment`` and ``row`` itself)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

TOKENS = 32
"""Tokens a routing program: 256 assignments at top-8 (512 programs at 16,384 tokens)."""


@triton.jit
def _topk_count(logit_ptr, ids_ptr, gate_ptr, part_ptr, tokens, E: tl.constexpr, EP2: tl.constexpr,
                K: tl.constexpr, KP2: tl.constexpr, BT: tl.constexpr):
    """ids[t], gate[t]: token t's K largest logits' experts (descending; among equal logits the lowest expert
    first) and the softmax of those K logits (fp32); part[p, e]: how many of program p's BT * K assignments
    (flat t * K + slot) go to expert e."""
    p, e, s = tl.program_id(0), tl.arange(0, EP2), tl.arange(0, KP2)
    t = p * BT + tl.arange(0, BT)
    live = t < tokens
    v = tl.load(logit_ptr + t.to(tl.int64)[:, None] * E + e[None, :], mask=live[:, None] & (e[None, :] < E),
                other=float("-inf")).to(tl.float32)
    vals = tl.full((BT, KP2), float("-inf"), tl.float32)
    ids = tl.zeros((BT, KP2), dtype=tl.int32)
    hot = tl.zeros((BT, EP2), dtype=tl.int32)
    for i in tl.static_range(K):
        m = tl.max(v, axis=1)
        j = tl.min(tl.where(v == m[:, None], e[None, :], EP2), axis=1)  # the lowest expert holding the max
        vals = tl.where(s[None, :] == i, m[:, None], vals)
        ids = tl.where(s[None, :] == i, j[:, None], ids)
        pick = e[None, :] == j[:, None]
        hot += pick.to(tl.int32)
        v = tl.where(pick, float("-inf"), v)
    g = tl.exp(vals - tl.max(vals, axis=1)[:, None])  # slots past K hold -inf: 0
    g = g / tl.sum(g, axis=1)[:, None]
    flat, keep = t[:, None] * K + s[None, :], live[:, None] & (s[None, :] < K)
    tl.store(ids_ptr + flat, ids, mask=keep)
    tl.store(gate_ptr + flat, g, mask=keep)
    tl.store(part_ptr + p * EP2 + e, tl.sum(tl.where(live[:, None], hot, 0), axis=0))


@triton.jit
def _scan(part_ptr, base_ptr, sched_ptr, parts, E: tl.constexpr, EP2: tl.constexpr, QB: tl.constexpr,
          BM: tl.constexpr):
    """base[p, e]: the first sorted row of program p's expert-e assignments (expert e's start row + the
    counts of programs before p); the schedule [row start of each expert, rows; first BM-row block of each
    expert, blocks] ((2, E + 1) int32). Two passes over the (parts, EP2) counts, QB programs' rows at a time."""
    q0, e = tl.arange(0, QB), tl.arange(0, EP2)
    counts = tl.zeros((EP2,), dtype=tl.int32)
    for c in range(0, parts, QB):
        q = c + q0
        counts += tl.sum(tl.load(part_ptr + q[:, None] * EP2 + e[None, :], mask=q[:, None] < parts, other=0), axis=0)
    row_start = tl.cumsum(counts, axis=0) - counts
    run = row_start
    for c in range(0, parts, QB):
        q = c + q0
        at, live = q[:, None] * EP2 + e[None, :], q[:, None] < parts
        part = tl.load(part_ptr + at, mask=live, other=0)
        tl.store(base_ptr + at, run[None, :] + tl.cumsum(part, axis=0) - part, mask=live)
        run += tl.sum(part, axis=0)
    tiles = (counts + BM - 1) // BM
    tl.store(sched_ptr + e, row_start, mask=e < E)
    tl.store(sched_ptr + E + 1 + e, tl.cumsum(tiles, axis=0) - tiles, mask=e < E)
    tl.store(sched_ptr + E, tl.sum(counts, axis=0))
    tl.store(sched_ptr + 2 * E + 1, tl.sum(tiles, axis=0))


@triton.jit
def _place(ids_ptr, base_ptr, order_ptr, row_ptr, ROWS, EP2: tl.constexpr, CHUNK: tl.constexpr,
           CP2: tl.constexpr):
    """Assignment r of program p (CHUNK a program, CP2 its power of two) goes to row base[p, e] + (how many of
    p's assignments before r go to e): ``order[row] = r``, ``row_of[r] = row`` (stable: argsort's order)."""
    p, e, i = tl.program_id(0), tl.arange(0, EP2), tl.arange(0, CP2)
    r = p * CHUNK + i
    live = (i < CHUNK) & (r < ROWS)
    x = tl.load(ids_ptr + r, mask=live, other=-1)
    hot = (x[:, None] == e[None, :]).to(tl.int32)  # (CHUNK, EP2): one 1 a live row
    base = tl.load(base_ptr + p * EP2 + e)
    dest = tl.sum(hot * (tl.cumsum(hot, axis=0) - hot + base[None, :]), axis=1)
    tl.store(order_ptr + dest, r, mask=live)
    tl.store(row_ptr + r, dest, mask=live)


def topk_route(logits: torch.Tensor, top_k: int, bm: int = 128, tokens_per_program: int = TOKENS
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """For router ``logits`` (tokens, experts): (ids (tokens, top_k) int32 and gates fp32 as
    ``aisp.kits.moe.route`` gives them up to the order of equal logits, int32 ``order`` = the flat assignments
    sorted by expert (stable), int32 ``row`` = its inverse, int32 schedule (2, experts + 1) of ``bm``-row
    blocks), on the device, three kernels, no host sync."""
    tokens, n_exp = logits.shape
    assert logits.is_contiguous() and top_k <= n_exp, "contiguous logits, top_k <= experts"
    ep2, bt = triton.next_power_of_2(n_exp), tokens_per_program
    parts, rows, dev = triton.cdiv(tokens, bt), tokens * top_k, logits.device
    ids = torch.empty(tokens, top_k, device=dev, dtype=torch.int32)
    gates = torch.empty(tokens, top_k, device=dev, dtype=torch.float32)
    part = torch.empty(parts, ep2, device=dev, dtype=torch.int32)
    base, order, row = torch.empty_like(part), torch.empty(rows, device=dev, dtype=torch.int32), torch.empty(
        rows, device=dev, dtype=torch.int32)
    sched = torch.empty(2 * n_exp + 2, device=dev, dtype=torch.int32)
    _topk_count[(parts,)](logits, ids, gates, part, tokens, E=n_exp, EP2=ep2, K=top_k,
                          KP2=triton.next_power_of_2(top_k), BT=bt, num_warps=4)
    _scan[(1,)](part, base, sched, parts, E=n_exp, EP2=ep2, QB=64, BM=bm, num_warps=4)
    _place[(parts,)](ids, base, order, row, rows, EP2=ep2, CHUNK=bt * top_k, CP2=triton.next_power_of_2(bt * top_k),
                     num_warps=4)
    return ids, gates, order, row, sched.view(2, n_exp + 1)
