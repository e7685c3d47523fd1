"""The persistent grouped GEMM of optimized_triton_grouped_gemm.py rewritten for Hopper: tiles by TMA, wider tiles.

Same walk as ``_grouped_gemm``: the host's table of 128-row blocks (expert, first row, end row),
a program per SM taking tiles pid, pid + programs, ... row block by row block, so a wave of
resident programs shares a few experts' B column blocks and each row block's A rows in L2 (the
profile's DRAM traffic, ~0.68 GB a call, is already the bytes the call needs once). Changes:

- A and B tiles move through two device-side tensor descriptors, built once per program: A over
  all (rows, K) of ``a``, B over the experts' weights seen as (experts * K, N). On sm_90 a tile is
  one TMA copy (``cp.async.bulk.tensor``) issued by one thread, not a 16-byte ``cp.async`` per
  thread with its own address and mask: fewer instructions and registers between the wgmmas.
- The K loop is software-pipelined (``tl.range``, ``num_stages`` tiles in flight) and the tile loop
  is flattened into it (``flatten=True``), so the next tile's first loads are issued while this
  tile's epilogue stores: the pointer kernel drains its pipeline at every tile.
- 128 x 256 tiles (the first two configs): the L2-to-SM bytes per FLOP fall by a quarter (a tile
  reads 128 + 256 rows of K for 128 x 256 outputs: 1.5 MiB per 134 MFLOP against 1 MiB per 67),
  which matters because the pointer kernel's busiest unit was L2 (80% of its peak). The epilogue
  stores C in four column quarters: the whole tile's pointers beside its 128-register accumulator
  spilled (128 bytes of stack a thread at 255 registers; 189 registers this way).

Why not a descriptor per expert (whose bounds would zero-fill a band's tail rows): a program's
consecutive tiles are 132 tiles apart, nearly always in different experts, so it would build and
fence a new descriptor at almost every tile, inside the pipelined loop. Here a block's box reads
past its band's end into the next band's rows (or TMA's zero fill past the end of ``a``); those
rows are multiplied like the pointer kernel's masked zeros and dropped by the masked store of C.
The 18.6% padded rows remain (the cost of one tile height for every band).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from optimized_triton_grouped_gemm import Tiling

from aisp.kits.tma import use_torch_scratch

BM = 128
"""Rows per block for every config: the host's block table is built for it (block_table(rows, BM))."""

CONFIGS = [triton.Config({"BN": bn, "BK": 64}, num_warps=8, num_stages=s) for bn, s in ((256, 3), (256, 4), (128, 4))]
"""Hopper, bf16, K = N = 2,048; three, as each is a compile inside the chapter's time budget. All
keep 128-row blocks over 8 warps (two warpgroups of 64 rows issuing wgmma) and 64-deep K steps
(128-byte rows, TMA's widest swizzle). (256 columns, 3 stages): 48 KiB a stage, 160 KiB of shared
memory with the epilogue's, a 128-register accumulator a thread (189 in all). (256, 4): one more
stage (208 KiB) in case TMA latency shows at one program per SM. (128, 4): the pointer kernel's tiles by TMA, which separates what
the copy engine buys from what the wider tile buys. tests/test_ch14_triton.py compiles each for
sm_90: wgmma, TMA, no spills, shared memory within the 227 KiB a block may take."""


@triton.jit
def _halves(x):
    """The left and right column halves of a 2-D tile."""
    rows: tl.constexpr = x.shape[0]
    cols: tl.constexpr = x.shape[1]
    return tl.split(tl.permute(tl.reshape(x, (rows, 2, cols // 2)), (0, 2, 1)))


@triton.jit
def _store_rows(c_ptr, acc, start, end, col, N, BM: tl.constexpr, BN: tl.constexpr):
    """C[start + i, col + j] = acc[i, j] for the rows before ``end``, in four column quarters: a
    pointer a value pair of the whole 128 x 256 tile, next to its accumulator, spills registers."""
    out_rows = start + tl.arange(0, BM)
    row_ok = (out_rows < end)[:, None]
    c_ptrs = c_ptr + out_rows[:, None].to(tl.int64) * N + col + tl.arange(0, BN // 4)[None, :]
    left, right = _halves(acc.to(c_ptr.dtype.element_ty))
    q0, q1 = _halves(left)
    q2, q3 = _halves(right)
    tl.store(c_ptrs, q0, mask=row_ok)
    tl.store(c_ptrs + BN // 4, q1, mask=row_ok)
    tl.store(c_ptrs + BN // 2, q2, mask=row_ok)
    tl.store(c_ptrs + 3 * BN // 4, q3, mask=row_ok)


@triton.jit
def _ab_descriptors(a_ptr, b_ptr, rows, experts, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """The A descriptor over all (rows, K) of ``a`` (BM x BK boxes) and the B descriptor over the
    experts' weights seen as (experts * K, N) (BK x BN boxes)."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[rows, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[experts * K, N], strides=[N, 1], block_shape=[BK, BN])
    return a_desc, b_desc


@triton.jit
def _grouped_gemm_tma(a_ptr, b_ptr, c_ptr, blk_group, blk_start, blk_end, blocks, programs, rows, experts, N, K,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """C[block rows, BN columns] = A[block rows] @ B[expert] for tiles pid, pid + programs, ... of the
    blocks x N / BN tiles, row block by row block."""
    a_desc, b_desc = _ab_descriptors(a_ptr, b_ptr, rows, experts, N, K, BM, BN, BK)
    tiles_n = N // BN
    for tile in tl.range(tl.program_id(0), blocks * tiles_n, programs, flatten=True):
        mb = tile // tiles_n
        start = tl.load(blk_start + mb)
        b_row = tl.load(blk_group + mb) * K
        col = (tile % tiles_n) * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in tl.range(0, K, BK):
            acc = tl.dot(a_desc.load([start, k]), b_desc.load([b_row + k, col]), acc)
        _store_rows(c_ptr, acc, start, tl.load(blk_end + mb), col, N, BM, BN)


_grouped_gemm_tuned = triton.autotune(CONFIGS, key=["N", "K", "experts"])(_grouped_gemm_tma)


def check_tma_operands(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, bk: int, bn: int) -> None:
    """Contiguous operands whose rows and bases TMA can address (16-byte aligned), K and N whole tiles."""
    _, k, n = b.shape
    if k % bk or n % bn:
        raise ValueError(f"grouped_mm_tma: K={k} and N={n} must be multiples of {bk} and {bn}")
    tensors = (a, b, out)
    if not all(t.is_contiguous() for t in tensors) or any(t.data_ptr() % 16 for t in tensors) \
            or (k * a.element_size()) % 16 or (n * b.element_size()) % 16:
        raise ValueError("grouped_mm_tma: TMA needs contiguous operands with 16-byte aligned bases and rows")


def grouped_mm_tma(a: torch.Tensor, b: torch.Tensor, table: tuple[torch.Tensor, ...], out: torch.Tensor,
                   programs: int, tiling: Tiling | None = None) -> torch.Tensor:
    """out[band g] = a[band g] @ b[g] for every expert band of ``table`` (block_table(rows, 128)).
    ``tiling`` None autotunes over CONFIGS on a GPU; a given tiling (bm 128 on a GPU, the table's
    block height elsewhere) launches once with it, as the CPU tests do under the interpreter."""
    return launch_grouped((_grouped_gemm_tma, _grouped_gemm_tuned), a, b, table, out, programs, tiling)


def launch_grouped(kernels: tuple, a: torch.Tensor, b: torch.Tensor, table: tuple[torch.Tensor, ...],
                   out: torch.Tensor, programs: int, tiling: Tiling | None) -> torch.Tensor:
    """Launch a persistent grouped kernel of _grouped_gemm_tma's signature, ``kernels`` = (the jitted
    kernel, its autotuner over CONFIGS), as grouped_mm_tma describes."""
    kernel, tuned = kernels
    experts, k, n = b.shape
    blocks = table[0].numel()
    if tiling is None and a.is_cuda:
        check_tma_operands(a, b, out, max(c.kwargs["BK"] for c in CONFIGS), max(c.kwargs["BN"] for c in CONFIGS))
        use_torch_scratch()
        grid = lambda meta: (min(programs, blocks * (n // meta["BN"])),)  # noqa: E731
        tuned[grid](a, b, out, *table, blocks, programs, a.shape[0], experts, n, k, BM=BM)
        return out
    tiling = tiling or Tiling()
    check_tma_operands(a, b, out, tiling.bk, tiling.bn)
    if a.is_cuda:
        use_torch_scratch()
    grid = (min(programs, blocks * (n // tiling.bn)),)
    kernel[grid](a, b, out, *table, blocks, programs, a.shape[0], experts, n, k, BM=tiling.bm, BN=tiling.bn,
                 BK=tiling.bk, num_warps=tiling.warps, num_stages=tiling.stages)
    return out
