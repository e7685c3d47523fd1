"""Chapter 7's Triton kernel for noncontiguous_views (not a pair): row_features of a transposed view,
read through the view's strides in coalesced tiles, with no contiguous copy. Imported only where
Triton is installed; the CPU tests run it under TRITON_INTERPRET=1.

Rows of ``v = x.t()`` are columns of x. A program owns BLOCK_J of them (BLOCK_J neighbouring
columns of x: 4 * BLOCK_J contiguous bytes in each row of x, whole 32-byte sectors) and walks down
x in tiles of BLOCK_I rows. Pass 1 keeps, per v-row, the online softmax state (running max m and a
sum s rescaled by exp(m_old - m_new)) and the layer-norm state (count, mean, M2, merged tile by tile
as Chan et al.'s parallel variance); pass 2 re-reads the tiles and writes
``(v - mean) * rstd + p * logp`` with ``logp = v - m - log s`` and ``p = exp(v - m) / s``: one
kernel, x read twice (8 bytes per element) and the result written once (4), where the eager chain
moves 48. The store is a transposed tile (contiguous along x's rows); Triton stages it through
shared memory so both the loads and the stores are coalesced.

``resident_row_features`` reads x once: a program holds its whole column block in registers (BLOCK_J
= 4 columns x 8192 rows = 128 KB, 64 floats a thread at 16 warps), reduces it (the max; the sum of
t - max, giving the mean, and the softmax sum; the exact two-pass variance) and writes: 8 bytes per
element, the fewest the result needs. Its 16-byte row segments are half a 32-byte sector; the
neighbouring program, launched at the same time, reads the other half, so the sector is fetched from
HBM once and hit in L2 the second time.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def strided_row_features_kernel(x_ptr, out_ptr, stride_r, eps, R: tl.constexpr, C: tl.constexpr,
                                 BLOCK_I: tl.constexpr, BLOCK_J: tl.constexpr):
    """out[j, i] for v = x.t(): x is (R, C) with strides (stride_r, 1); out is (C, R) contiguous."""
    j = tl.program_id(0) * BLOCK_J + tl.arange(0, BLOCK_J)
    mj = j < C
    m = tl.full([BLOCK_J], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK_J], tl.float32)
    mean = tl.zeros([BLOCK_J], tl.float32)
    m2 = tl.zeros([BLOCK_J], tl.float32)
    for start in range(0, R, BLOCK_I):
        i = start + tl.arange(0, BLOCK_I)
        mi = i < R
        t = tl.load(x_ptr + i[:, None].to(tl.int64) * stride_r + j[None, :], mask=mi[:, None] & mj[None, :],
                    other=0.0).to(tl.float32)
        # softmax state: padded rows of the tile are -inf (they add exp(-inf) = 0); padded columns are 0
        ts = tl.where(mi[:, None], t, float("-inf"))
        m_new = tl.maximum(m, tl.max(ts, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(ts - m_new[None, :]), axis=0)
        m = m_new
        # layer-norm state: this tile's count, mean and M2, merged into the running ones
        n_old = start * 1.0
        n_tile = tl.minimum(R - start, BLOCK_I) * 1.0
        n_new = n_old + n_tile
        tile_mean = tl.sum(t, axis=0) / n_tile
        d = tl.where(mi[:, None], t - tile_mean[None, :], 0.0)
        delta = tile_mean - mean
        mean = mean + delta * (n_tile / n_new)
        m2 = m2 + tl.sum(d * d, axis=0) + delta * delta * (n_old * n_tile / n_new)
    rstd = 1.0 / tl.sqrt(m2 / R + eps)
    log_s = tl.log(s)
    inv_s = 1.0 / s
    for start in range(0, R, BLOCK_I):
        i = start + tl.arange(0, BLOCK_I)
        mask = (i < R)[:, None] & mj[None, :]
        t = tl.load(x_ptr + i[:, None].to(tl.int64) * stride_r + j[None, :], mask=mask, other=0.0).to(tl.float32)
        shifted = t - m[None, :]
        y = (t - mean[None, :]) * rstd[None, :] + (tl.exp(shifted) * inv_s[None, :]) * (shifted - log_s[None, :])
        tl.store(out_ptr + j[None, :].to(tl.int64) * R + i[:, None], y, mask=mask)


def strided_row_features(x: torch.Tensor, out: torch.Tensor, *, block_i: int = 256, block_j: int = 16,
                         num_warps: int = 4) -> torch.Tensor:
    """``row_features(x.t())`` into ``out`` (shape x.t().shape, contiguous) without copying x.t():
    x is 2-D fp32 with a unit stride along its columns. Its shape is a compile-time constant (one
    compilation per shape: the loop bounds are known, the pair runs one shape)."""
    rows, cols = x.shape
    assert x.dtype == out.dtype == torch.float32 and x.stride(1) == 1 and out.is_contiguous()
    assert out.shape == (cols, rows)
    strided_row_features_kernel[(triton.cdiv(cols, block_j),)](x, out, x.stride(0), 1e-5, R=rows, C=cols,
                                                               BLOCK_I=block_i, BLOCK_J=block_j, num_warps=num_warps)
    return out


@triton.jit(do_not_specialize=["stride_oi"])
def resident_row_features_kernel(x_ptr, out_ptr, stride_r, stride_oi, eps, zero, R: tl.constexpr,
                                 C: tl.constexpr, R_PAD: tl.constexpr, BLOCK_J: tl.constexpr, MASKED: tl.constexpr):
    """out[j, i] for v = x.t() with all R rows of the program's BLOCK_J columns of x held in registers.

    ``zero`` is a runtime 0.0: pass 2 subtracts ``m + zero`` and ``mean + zero``, values the compiler
    cannot prove equal to pass 1's, so it recomputes t - m, exp and t - mean from t instead of keeping
    pass 1's (CSE would hold three 64-float arrays a thread where one fits: 128 registers and a
    728-byte spill at 16 warps, against 108 and none). ``stride_oi`` (the output's unit stride) is not
    specialized, so Triton stores from the loads' own thread-to-element map, no shared-memory
    transpose: lane l of a warp writes row l, 32 lanes one 128-byte line of an output row."""
    j = tl.program_id(0) * BLOCK_J + tl.arange(0, BLOCK_J)
    i = tl.arange(0, R_PAD)
    src = x_ptr + i[:, None].to(tl.int64) * stride_r + j[None, :]
    if MASKED:
        mask = (i < R)[:, None] & (j < C)[None, :]
        t = tl.load(src, mask=mask, other=0.0).to(tl.float32)
        m = tl.max(tl.where(mask, t, float("-inf")), axis=0)
    else:
        t = tl.load(src).to(tl.float32)
        m = tl.max(t, axis=0)
    # centred on the max: sum(t - m) loses no digits to an offset the values share (t ~ 100 +- 1)
    t_m = t - m[None, :]
    e = tl.exp(t_m)
    if MASKED:
        t_m = tl.where(mask, t_m, 0.0)
        e = tl.where(mask, e, 0.0)
    mean = m + tl.sum(t_m, axis=0) / R
    s = tl.sum(e, axis=0)
    d = t - mean[None, :]
    if MASKED:
        d = tl.where(mask, d, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / R + eps)
    log_s = tl.log(s)
    inv_s = 1.0 / s
    shifted = t - (m + zero)[None, :]
    y = (t - (mean + zero)[None, :]) * rstd[None, :] + (tl.exp(shifted) * inv_s[None, :]) * (shifted - log_s[None, :])
    dst = out_ptr + j[None, :].to(tl.int64) * R + i[:, None] * stride_oi  # formed here: 64 addresses live no longer
    if MASKED:
        tl.store(dst, y, mask=mask)
    else:
        tl.store(dst, y)


RESIDENT_FLOATS_PER_THREAD = 64
"""The most x a thread of ``resident_row_features`` holds: 8192 rows x 4 columns over 16 warps."""


def resident_row_features(x: torch.Tensor, out: torch.Tensor, *, block_j: int = 4, num_warps: int = 16) -> torch.Tensor:
    """``row_features(x.t())`` into ``out`` (shape x.t().shape) reading x from HBM once: each program
    keeps its ``block_j`` columns of x, every row, in registers. x is 2-D fp32 with a unit stride along
    its columns and at most 8192 rows at the defaults (more would spill)."""
    rows, cols = x.shape
    r_pad = triton.next_power_of_2(rows)
    assert x.dtype == out.dtype == torch.float32 and x.stride(1) == 1 and out.is_contiguous()
    assert out.shape == (cols, rows)
    assert r_pad * block_j <= RESIDENT_FLOATS_PER_THREAD * 32 * num_warps, "the column block does not fit in registers"
    masked = r_pad != rows or cols % block_j != 0
    resident_row_features_kernel[(triton.cdiv(cols, block_j),)](
        x, out, x.stride(0), out.stride(1), 1e-5, 0.0, R=rows, C=cols, R_PAD=r_pad, BLOCK_J=block_j,
        MASKED=masked, num_warps=num_warps)
    return out
