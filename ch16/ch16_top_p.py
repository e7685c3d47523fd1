"""Top-p sampling of many rows in one Triton kernel, without sorting the vocabulary (``gpu_sampling``'s ``_fused``).

The math is ``baseline_gpu_sampling.top_p_race``'s: in the stable descending order of the logits a
token is kept while the probability of the tokens before it is below ``p``; then an exponential race,
argmax(prob / E) over the kept tokens with E = -log(u) from the hashed key of (row, token), draws one.

The kept tokens are a prefix of that order, and a peaked distribution's prefix is short. One program
a row holds the row's logits as int32 keys in the floats' order (32 a thread) and:

1. takes the row's max and the softmax's sum, exp(logit - max) in float64 as the reference's softmax;
2. bisects on the key for a floor with ``CANDIDATES`` to ``BUFFER`` tokens at or above it (counts only,
   no float; it stops at the first that fits: ~12 steps of ~1.1 us on the H200);
3. writes the indices of the tokens at or above it to a scratch row, each at a slot an atomic add on a
   counter draws (no scan over the row), then packs them with their keys so that one descending sort
   of ``BUFFER`` integers is the reference's stable order;
4. on those few: probabilities, their running sum, the cut (``before < p``) and the race, as the
   reference computes them.

Every token outside the candidates lies after all of them in that order, so the cut is among them
whenever their probability reaches ``p``. A row where it does not (a flat distribution, or ties that
leave only a floor with fewer than ``CANDIDATES``; gpu_sampling's rows keep a median 196 tokens, at
most 547, and their top 768 held >= 0.919 of the mass in 10,240 simulated rows) takes the exact slow path: a bisection on the
key, each step a float64 sum over the whole row with the exponentials recomputed (up to 32 steps,
~580 us for 64 flat rows), ties ranked by index, the race over the row.
Sums run in another order than the reference's, so a cut moves only where the probability before a
token lies within ~1e-16 of ``p`` (see the baseline's Tolerance).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from ch16_top_p_parts import HASH_MULTIPLIERS, _draw, _exact, _keys, _logit, _total

CANDIDATES = 768
"""The fewest tokens a row's floor keeps (gpu_sampling's rows: the top 768 held >= 0.919 of 10,240 rows' mass)."""
BUFFER = 1024
"""Scratch slots a row, the most tokens a floor keeps (the sort's length: a power of two)."""


@triton.jit
def _top_p_race(logits_ptr, tokens_ptr, p_ptr, scratch_ptr, vocab, first_key_row, BLOCK: tl.constexpr,
                CANDIDATES: tl.constexpr, BUFFER: tl.constexpr, M1: tl.constexpr, M2: tl.constexpr,
                M3: tl.constexpr):
    """Program r: the token drawn for row r of ``logits`` (rows, vocab), its keys (first_key_row + r) * vocab + token.
    The row is a (BLOCK // 32, 32) tile. Only the keys stay in registers; each exponential over the row is
    recomputed where it is used, under a mask that differs from use to use, so that the compiler neither
    keeps one nor hoists one out of a loop."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK // 32)[:, None] * 32 + tl.arange(0, 32)[None, :]
    live = offs < vocab
    key = _keys(logits_ptr, row, vocab, offs)
    top = _logit(tl.max(tl.max(key, 1), 0))
    total = _total(tl.exp(tl.where(live, _logit(key) - top, float("-inf"))))
    p = tl.load(p_ptr)  # float64 (a float argument would reach the kernel as fp32)
    draw_base = (first_key_row + row) * vocab

    # 2. a floor with CANDIDATES to BUFFER tokens at or above it: bisect on the key by counts, stop at the first
    lo = tl.min(tl.min(tl.where(live, key, 2147483647), 1), 0).to(tl.int64)  # too many at or above (or all fit)
    hi = tl.max(tl.max(key, 1), 0).to(tl.int64) + 1  # too few (none)
    floor = lo
    n = _total(live.to(tl.int32))
    searching = (n > BUFFER).to(tl.int32)
    while (searching == 1) & (hi - lo > 1):
        mid = lo + (hi - lo) // 2
        count = _total((key >= mid.to(tl.int32)).to(tl.int32))
        fits = (count >= CANDIDATES) & (count <= BUFFER)
        lo = tl.where(count > BUFFER, mid, lo)
        hi = tl.where(count < CANDIDATES, mid, hi)
        floor = tl.where(fits, mid, floor)
        n = tl.where(fits, count, n)
        searching = tl.where(fits, 0, 1)
    if searching == 1:  # no floor fits (ties at lo span the range): hi's fewer tokens
        floor = hi
        n = _total((key >= hi.to(tl.int32)).to(tl.int32))
    candidate = key >= floor.to(tl.int32)

    token = tl.zeros((), tl.int64)
    found = n <= BUFFER
    if found:
        # 3. the candidates' indices to the row's scratch (int32: BUFFER slots, then a counter), each at a slot
        # its atomic add drew: no scan over the row; the sort restores the order. Packed as key (high) and
        # BLOCK - index (low), one descending sort of BUFFER integers is the reference's stable order.
        ints = scratch_ptr.to(tl.pointer_type(tl.int32)) + row * 2 * BUFFER
        tl.store(ints + BUFFER, 0)
        tl.debug_barrier()
        slot = tl.atomic_add(ints + BUFFER + tl.zeros_like(offs), 1, mask=candidate, sem="relaxed", scope="cta")
        tl.store(ints + slot, offs, mask=candidate)
        tl.debug_barrier()
        lanes = tl.arange(0, BUFFER)
        valid = lanes < n
        index = tl.load(ints + lanes, mask=valid, other=0)
        packed = (_keys(logits_ptr, row, vocab, index).to(tl.int64) << 32) | (BLOCK - index).to(tl.int64)
        packed = tl.sort(tl.where(valid, packed, -9223372036854775807 - 1), descending=True)
        index = BLOCK - (packed & 0xFFFFFFFF)
        # 4. the reference's cut and race on them
        probs = tl.where(valid, tl.exp(_logit((packed >> 32).to(tl.int32)) - top) / total, 0.0)
        before = tl.cumsum(probs, 0) - probs
        found = tl.max(before + probs, 0) >= p  # the candidates reach p: the cut is among them
        kept = valid & (before < p)
        race = tl.where(kept, probs / _draw(draw_base + index, M1, M2, M3), -1.0)
        token = tl.sum(tl.where(lanes == tl.argmax(race, 0), index, 0), 0)
    if not found:  # the candidates do not reach p: the exact slow path over the whole row
        token = _exact(logits_ptr, row, vocab, offs, top, total, p, draw_base, BLOCK, M1, M2, M3)
    tl.store(tokens_ptr + row, token)


def launch_options(num_warps: int) -> dict[str, int]:
    """A program takes a whole SM (``num_warps`` x 32 threads) and the registers of one: ``maxnreg`` is
    65,536 / threads (ptxas chose 32 of the 64 a thread may have at 1,024 threads, and spilled, when not told)."""
    return {"num_warps": num_warps, "maxnreg": min(255, 65536 // (32 * num_warps))}


def top_p_race_rows(logits: torch.Tensor, p: torch.Tensor, first_key_row: int, tokens: torch.Tensor,
                    scratch: torch.Tensor, num_warps: int = 32, candidates: int = CANDIDATES,
                    buffer: int = BUFFER) -> torch.Tensor:
    """``tokens`` (rows,) int64 := the token drawn for each row of ``logits`` (rows, vocab) fp32, row r's
    keys being (first_key_row + r) * vocab + token, as ``top_p_race`` draws them with those keys;
    ``p``: the top-p as a one-element float64 tensor on the logits' device; ``scratch``: int64, at
    least rows x ``buffer``. ``candidates`` <= ``buffer`` (a power of two): the tests shrink them to reach
    every path at small sizes; both are capped at the row's power-of-two block (at least 32)."""
    rows, vocab = logits.shape
    if logits.dtype != torch.float32 or not logits.is_contiguous() or tokens.shape != (rows,) or \
            tokens.dtype != torch.int64 or p.dtype != torch.float64 or p.numel() != 1 or \
            scratch.dtype != torch.int64 or scratch.numel() < rows * buffer or not 0 < candidates <= buffer or \
            buffer & (buffer - 1):
        raise ValueError(f"top_p_race_rows: logits {logits.dtype} {tuple(logits.shape)}, tokens {tokens.dtype} "
                         f"{tuple(tokens.shape)}, p {p.dtype} of {p.numel()}, scratch {scratch.dtype} of {scratch.numel()}")
    if (first_key_row + rows) * vocab >= 2**31:
        raise ValueError("top_p_race_rows: keys past 2^31 (the hash's domain)")
    block = max(32, triton.next_power_of_2(vocab))
    _top_p_race[(rows,)](logits, tokens, p, scratch, vocab, first_key_row, BLOCK=block,
                         CANDIDATES=min(candidates, block), BUFFER=min(buffer, block), M1=HASH_MULTIPLIERS[0], M2=HASH_MULTIPLIERS[1],
                         M3=HASH_MULTIPLIERS[2], **launch_options(num_warps))
    return tokens
