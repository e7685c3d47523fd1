"""The pieces of ``ch16_top_p``'s kernel: the hashed draws, the order keys, sums and counts over a row
held as a (BLOCK // 32, 32) tile, and the exact slow path for a row the candidates do not cover."""

from __future__ import annotations

import triton
import triton.language as tl

HASH_MULTIPLIERS = (0x2545F491, 0x5851F42D, 0x4C957F2D)
"""``baseline_gpu_sampling.key_hash``'s multipliers, in its order (the kernel repeats them)."""


@triton.jit
def _mix(x, mult: tl.constexpr):
    return ((x ^ (x >> 15)) * mult) & 0x7FFFFFFF


@triton.jit
def _draw(keys, M1: tl.constexpr, M2: tl.constexpr, M3: tl.constexpr):
    """``race_noise``: Exp(1) in float64 from the hashed int64 keys."""
    return -tl.log((_mix(_mix(_mix(keys, M1), M2), M3).to(tl.float64) + 0.5) / 2147483648.0)


@triton.jit
def _logit(key):
    """The fp32 logit of an order key, as float64 (the key map is its own inverse)."""
    return tl.where(key < 0, key ^ 0x7FFFFFFF, key).to(tl.float32, bitcast=True).to(tl.float64)


@triton.jit
def _total(x):
    """Sum of a (BLOCK // 32, 32) tile."""
    return tl.sum(tl.sum(x, 1), 0)


@triton.jit
def _before(flags):
    """Of a (BLOCK // 32, 32) 0/1 tile in row-major order: the flags before each element. Two short scans
    (along the 32 columns, then over the row sums) instead of one over BLOCK elements, which Triton runs
    as BLOCK / threads rounds across the whole program (~60 us of the first version's ~105 us)."""
    per_row = tl.sum(flags, 1)
    return (tl.cumsum(per_row, 0) - per_row)[:, None] + tl.cumsum(flags, 1) - flags


@triton.jit
def _keys(logits_ptr, row, vocab, offs):
    """Row ``row``'s logits at ``offs`` as int32 keys in the floats' order (-0.0 as 0.0: the sort ties
    them); the lowest key past the row's end."""
    live = offs < vocab
    x = tl.load(logits_ptr + row * vocab + offs, mask=live, other=0.0)
    bits = tl.where(x == 0.0, 0.0, x).to(tl.int32, bitcast=True)
    return tl.where(live, tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits), -2147483648)


@triton.jit
def _exact(logits_ptr, row, vocab, offs, top, total, p, draw_base, BLOCK: tl.constexpr, M1: tl.constexpr,
           M2: tl.constexpr, M3: tl.constexpr):
    """The token drawn from the whole row: bisect on the key (lo always has mass(key >= lo) >= p * total, hi
    never), each step a float64 sum over the row; ties at the cut ranked by index; the race over the row.
    The keys are loaded again (from L2): kept live across the fast path, they cost it registers (spills)."""
    live = offs < vocab
    key = _keys(logits_ptr, row, vocab, offs)
    target = p * total
    lo = tl.min(tl.min(tl.where(live, key, 2147483647), 1), 0).to(tl.int64)
    hi = tl.max(tl.max(key, 1), 0).to(tl.int64) + 1
    while hi - lo > 1:
        mid = lo + (hi - lo) // 2
        mass = _total(tl.exp(tl.where(key >= mid.to(tl.int32), _logit(key) - top, float("-inf"))))
        lo = tl.where(mass >= target, mid, lo)
        hi = tl.where(mass >= target, hi, mid)
    cut = lo.to(tl.int32)
    above = _total(tl.exp(tl.where(key > cut, _logit(key) - top, float("-inf"))))
    tied = key == cut  # the cut is a live key
    rank = _before(tied.to(tl.int32))  # ties before this one, in index order
    kept = (key > cut) | (tied & (above + rank.to(tl.float64) * tl.exp(_logit(cut) - top) < target))
    race = tl.where(kept, tl.exp(tl.where(kept, _logit(key) - top, float("-inf"))) /
                    _draw(draw_base + offs, M1, M2, M3), -1.0)
    best = tl.max(tl.max(race, 1), 0)
    token = tl.min(tl.min(tl.where(race == best, offs, BLOCK), 1), 0).to(tl.int64)  # the first index at the max
    return token
