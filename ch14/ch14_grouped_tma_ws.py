"""The TMA grouped GEMM of ch14_grouped_tma.py with its K loop warp-specialized by Triton 3.6:
a producer warpgroup issues the A/B copies for every tile, two consumer warpgroups of 64 rows each
do the wgmma and the epilogue.

Same persistent walk over the same table of 128-row blocks, same descriptors and launcher
(``launch_grouped``), another loop: ``tl.range(0, K, BK, warp_specialize=True)``. Compiled for sm_90
(tests/test_ch14_triton.py), Triton's Hopper pass (``nvgpu-warp-specialization``) does this, at
``num_warps=4`` as in ch18_attention_ws.py (at 8 warps the flag changes nothing):

- It partitions the whole tile loop, not only the K loop: the kernel runs 12 warps, each warpgroup
  walking the program's tiles. The producer (``setmaxnreg.dec`` to 40 registers) issues the TMA
  copies of tile after tile, so the next tile's loads run while the consumers store this one (what
  ``_tma`` gets from ``flatten=True``); the consumers (``setmaxnreg.inc`` to 232) each own 64 rows
  of the 128 x BN accumulator (wgmma m64nBN), and mbarriers between the groups replace the
  block-wide wait for each copy. Each consumer still waits for its own wgmma (``wgmma.wait_group
  0``) before releasing the stage; only the other consumer's wgmma can overlap that wait.
  Marking the tile loop instead gives the same PTX.
- ``flatten=True`` on the tile loop turns the pass off without a word (4 warps, 255 registers, over
  1 KiB of stack), so the tile loop is not flattened here.
- ``_store_rows``'s column quarters (reshape, permute, split) abort the pass ("unsupported op type"
  in its data partitioning, WSDataPartition.cpp), so the epilogue is one masked store of the
  consumer's 64 x BN rows. It does not spill: Triton stages it through shared memory into 16-byte
  stores, and a consumer holds half the accumulator (128 registers a thread at 256 columns).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from ch14_grouped_tma import _ab_descriptors, launch_grouped
from optimized_triton_grouped_gemm import Tiling

CONFIGS = [triton.Config({"BN": bn, "BK": 64}, num_warps=4, num_stages=s) for bn, s in ((256, 3), (256, 4), (128, 4))]
"""``ch14_grouped_tma.CONFIGS``'s tiles at 4 warps (a consumer warpgroup; Triton adds the second and
the producer). Shared memory on sm_90 (compiled, tests/test_ch14_triton.py): 176 KiB for 128 x 256 with
3 stages, 224 KiB with 4 (just under the 227 KiB a block may take), 144 KiB for 128 x 128 with 4: the
epilogue's staging buffer adds 16 KiB to ``_tma``'s 160 and 208 (8 to its 136). No spills; 168
registers a thread at launch (65,536 over 384 threads), redistributed by setmaxnreg."""


@triton.jit
def _store_band_rows(c_ptr, acc, start, end, col, N, BM: tl.constexpr, BN: tl.constexpr):
    """C[start + i, col + j] = acc[i, j] for the rows before ``end``, in one store."""
    out_rows = start + tl.arange(0, BM)
    c_ptrs = c_ptr + out_rows[:, None].to(tl.int64) * N + col + tl.arange(0, BN)[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(out_rows < end)[:, None])


@triton.jit
def _grouped_gemm_tma_ws(a_ptr, b_ptr, c_ptr, blk_group, blk_start, blk_end, blocks, programs, rows, experts, N, K,
                         BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """_grouped_gemm_tma's walk over tiles pid, pid + programs, ..., its K loop warp-specialized."""
    a_desc, b_desc = _ab_descriptors(a_ptr, b_ptr, rows, experts, N, K, BM, BN, BK)
    tiles_n = N // BN
    for tile in tl.range(tl.program_id(0), blocks * tiles_n, programs):
        mb = tile // tiles_n
        start = tl.load(blk_start + mb)
        b_row = tl.load(blk_group + mb) * K
        col = (tile % tiles_n) * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in tl.range(0, K, BK, warp_specialize=True):
            acc = tl.dot(a_desc.load([start, k]), b_desc.load([b_row + k, col]), acc)
        _store_band_rows(c_ptr, acc, start, tl.load(blk_end + mb), col, N, BM, BN)


_grouped_gemm_ws_tuned = triton.autotune(CONFIGS, key=["N", "K", "experts"])(_grouped_gemm_tma_ws)


def grouped_mm_tma_ws(a: torch.Tensor, b: torch.Tensor, table: tuple[torch.Tensor, ...], out: torch.Tensor,
                      programs: int, tiling: Tiling | None = None) -> torch.Tensor:
    """out[band g] = a[band g] @ b[g] for every expert band of ``table`` (block_table(rows, 128)).
    ``tiling`` as in grouped_mm_tma (give ``warps=4`` on a GPU: at 8 the loop is not specialized)."""
    return launch_grouped((_grouped_gemm_tma_ws, _grouped_gemm_ws_tuned), a, b, table, out, programs, tiling)
