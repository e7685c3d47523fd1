"""Chapter 19's grouped fp8 GEMM pieces (Triton device functions), shared by the grouped MoE kernels of
optimized_fp8_moe_triton.py, optimized_fp8_moe_fused_combine.py and ch19_moe_schedule.py: the persistent
walk's tile over a host-built table, the tile's fp8 wgmma loop fed by TMA, and the scaled bf16 epilogue."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def tile_of(t, blocks, col_tiles, table_ptr, BN: tl.constexpr, GROUP: tl.constexpr):
    """Tile ``t`` of the persistent walk: expert, first and end row, first column (GROUP row blocks per column tile)."""
    first = t // (GROUP * col_tiles) * GROUP
    size = tl.minimum(blocks - first, GROUP)
    block, col0 = first + t % (GROUP * col_tiles) % size, t % (GROUP * col_tiles) // size * BN
    e, row0 = tl.load(table_ptr + block), tl.load(table_ptr + blocks + block)
    return e, row0, tl.load(table_ptr + 2 * blocks + block), col0


@triton.jit
def tile_dot(a_desc, b_desc, e, row0, col0, N, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
             BK: tl.constexpr):
    """The tile's fp32 accumulator over K (rows past the block, the next expert's: multiplied, never stored)."""
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc = tl.dot(a_desc.load([row0, k]), b_desc.load([e * N + col0, k]).T, acc)
    return acc


@triton.jit
def store_tile(acc, sa_ptr, sb_ptr, c_ptr, e, row0, row1, col0, N, BM: tl.constexpr, BN: tl.constexpr):
    """The epilogue: row scales ``sa`` and expert e's channel scales ``sb`` applied, stored in c's dtype for the
    block's rows only (``row0 <= r < row1``)."""
    rows, cols = row0 + tl.arange(0, BM), e * N + col0 + tl.arange(0, BN)
    scale = tl.load(sa_ptr + rows, mask=rows < row1, other=0.0)[:, None] * tl.load(sb_ptr + cols)[None, :]
    out = c_ptr + rows.to(tl.int64)[:, None] * N + (cols - e * N)[None, :]
    tl.store(out, (acc * scale).to(c_ptr.dtype.element_ty), mask=rows[:, None] < row1)
