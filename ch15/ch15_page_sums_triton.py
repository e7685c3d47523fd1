"""The Triton kernel of ``ch15_page_sums``: PyTorch's CUDA summation order for one page per program.
Imported only where it runs (CUDA, or TRITON_INTERPRET=1 in the CPU tests)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _fold(w, R: tl.constexpr, N: tl.constexpr, DOWN: tl.constexpr):
    """[R, N] -> [R, N / 2]: column i + column i + N/2 (``DOWN``: shfl_down with a halving offset), or
    column 2i + column 2i+1 (a doubling offset). One IEEE fp32 add per pair, as a warp shuffle step."""
    if DOWN:
        lo, hi = tl.split(tl.permute(tl.reshape(w, [R, 2, N // 2]), [0, 2, 1]))
    else:
        lo, hi = tl.split(tl.reshape(w, [R, N // 2, 2]))
    return lo + hi


@triton.jit
def page_sums_kernel(pool, state, out, layer_stride, k0, k1, S: tl.constexpr, FIRST: tl.constexpr,
                     LAST: tl.constexpr, DOWN: tl.constexpr):
    """Program p: page p's k-steps [k0, k1) (k0, k1 and S multiples of 4; S = page elements / 512; a
    k-step is 512 consecutive elements of one layer) added into its 4 x 512 accumulators (zeros if FIRST,
    else ``state``); stored back to ``state``, or, if LAST, folded as PyTorch's block does into out[p]."""
    page = tl.program_id(0).to(tl.int64)
    t = tl.arange(0, 512)
    src = pool + page * (S * 512) + t
    st = state + page * 2048 + t
    if FIRST:
        a0 = tl.zeros([512], tl.float32)
        a1 = tl.zeros([512], tl.float32)
        a2 = tl.zeros([512], tl.float32)
        a3 = tl.zeros([512], tl.float32)
    else:
        a0 = tl.load(st)
        a1 = tl.load(st + 512)
        a2 = tl.load(st + 1024)
        a3 = tl.load(st + 1536)
    for k in range(k0, k1, 4):
        row = src + tl.cast(k // S, tl.int64) * layer_stride + (k % S) * 512
        v0 = tl.load(row)
        v1 = tl.load(row + 512)
        v2 = tl.load(row + 1024)
        v3 = tl.load(row + 1536)
        a0 = a0 + v0.to(tl.float32)
        a1 = a1 + v1.to(tl.float32)
        a2 = a2 + v2.to(tl.float32)
        a3 = a3 + v3.to(tl.float32)
    if LAST:
        w = tl.reshape(((a0 + a1) + a2) + a3, [16, 32])  # [warp y, lane x]: thread x + 32 y
        w = _fold(w, 16, 32, DOWN)
        w = _fold(w, 16, 16, DOWN)
        w = _fold(w, 16, 8, DOWN)
        w = _fold(w, 16, 4, DOWN)
        w = _fold(w, 16, 2, DOWN)  # [16, 1]: each warp's lane 0
        w = tl.reshape(w, [1, 16])
        w = _fold(w, 1, 16, True)  # the warps in shared memory: offsets 8, 4, 2, 1
        w = _fold(w, 1, 8, True)
        w = _fold(w, 1, 4, True)
        w = _fold(w, 1, 2, True)
        tl.store(out + page + tl.arange(0, 1), tl.reshape(w, [1]))
    else:
        tl.store(st, a0)
        tl.store(st + 512, a1)
        tl.store(st + 1024, a2)
        tl.store(st + 1536, a3)
