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

