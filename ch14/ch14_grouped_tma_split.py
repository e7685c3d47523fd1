"""The TMA grouped GEMM of ch14_grouped_tma.py with two block heights: 128 rows, and 64 for a band's short tail.

``_grouped_gemm_tma`` covers every expert band with 128-row blocks, so a band's last block is
partly empty: on the pair's routing (64 bands of 40-488 rows, 16,984 rows) the tensor cores multiply
20,864 rows, 18.6% of them padding. ``split_block_table`` ends a band whose remainder (rows mod
128) is 1-64 rows in one 64-row block instead: 33 of the 64 bands, so the multiplied rows fall to
18,752 and the padding to 9.4% (``padded_fraction``: computed from the table, not measured).
Bands whose remainder is 0 or 65-127 keep their 128-row blocks. Like ``_tma``'s, the table is
built once per routing, in the pair's setup.

The kernel is ``_grouped_gemm_tma``'s persistent walk over the table in band order, so a short
block's tiles run beside its band's tall blocks and read the expert's weights while they are in
L2 (all the short blocks after all the tall ones, in a second loop or a second launch, would
fetch 33 experts' 8 MiB of weights from DRAM again: ~0.28 GB, 40% over the 0.68 GB the call
needs). Each tile branches on its block's height into one of two code paths with constexpr
heights BM and BM // 2, each with its own A descriptor and software-pipelined K loop; a 64-row
tile runs as two 64 x 128 wgmmas (the two warpgroups split the columns), a 128-row one as two
64 x 256. The price: the tile loop is no longer flattened into the K loop (Triton's loop fusion
does not look inside an ``if``; ``flatten=True`` here leaves the compiled PTX unchanged), so
each tile drains its K pipeline before its epilogue, as the pointer kernel does. Compiled for
sm_90 (tests/test_ch14_triton.py): no spills, 252-254 registers a thread for the 128 x 256
configs (188-189 in ``_tma``), shared memory 144-192 KiB (the two paths' buffers share it).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from ch14_grouped_tma import CONFIGS, _store_rows, launch_grouped
from optimized_triton_grouped_gemm import Tiling, block_table


def split_block_table(rows: list[int], bm: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    """(expert, first row, end row, height) of every block, as int32: block_table's bm-row blocks,
    each bm // 2 rows high where it holds at most bm // 2 of its band's rows (a band's last block)."""
    group, start, end = block_table(rows, bm, torch.device("cpu"))
    height = torch.where(end - start > bm // 2, bm, bm // 2).to(torch.int32)
    return tuple(t.to(device) for t in (group, start, end, height))


def padded_fraction(rows: list[int], bm: int) -> float:
    """The share of the rows the kernel multiplies (the table's heights) past their band's end."""
    multiplied = split_block_table(rows, bm, torch.device("cpu"))[3].sum().item()
    return 1 - sum(rows) / multiplied if multiplied else 0.0


@triton.jit
def _block_tile(a_desc, b_desc, c_ptr, start, end, b_row, col, N, K, BM: tl.constexpr, BN: tl.constexpr,
                BK: tl.constexpr):
    """C[start:start + BM, col:col + BN] = A[start:start + BM] @ B[b_row:b_row + K, col:col + BN],
    stored for the rows before ``end``; the K loop software-pipelined."""
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, K, BK):
        acc = tl.dot(a_desc.load([start, k]), b_desc.load([b_row + k, col]), acc)
    _store_rows(c_ptr, acc, start, end, col, N, BM, BN)


@triton.jit
def _grouped_gemm_tma_split(a_ptr, b_ptr, c_ptr, blk_group, blk_start, blk_end, blk_height, blocks, programs, rows,
                            experts, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """_grouped_gemm_tma's walk over tiles pid, pid + programs, ..., each tile as high as its block
    (BM, or BM // 2 where the table says so)."""
    SHORT: tl.constexpr = BM // 2
    tall_desc = tl.make_tensor_descriptor(a_ptr, shape=[rows, K], strides=[K, 1], block_shape=[BM, BK])
    short_desc = tl.make_tensor_descriptor(a_ptr, shape=[rows, K], strides=[K, 1], block_shape=[SHORT, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[experts * K, N], strides=[N, 1], block_shape=[BK, BN])
    tiles_n = N // BN
    for tile in tl.range(tl.program_id(0), blocks * tiles_n, programs):
        mb = tile // tiles_n
        start = tl.load(blk_start + mb)
        end = tl.load(blk_end + mb)
        b_row = tl.load(blk_group + mb) * K
        col = (tile % tiles_n) * BN
        if tl.load(blk_height + mb) == BM:
            _block_tile(tall_desc, b_desc, c_ptr, start, end, b_row, col, N, K, BM, BN, BK)
        else:
            _block_tile(short_desc, b_desc, c_ptr, start, end, b_row, col, N, K, SHORT, BN, BK)


_grouped_gemm_split_tuned = triton.autotune(CONFIGS, key=["N", "K", "experts"])(_grouped_gemm_tma_split)


def grouped_mm_tma_split(a: torch.Tensor, b: torch.Tensor, table: tuple[torch.Tensor, ...], out: torch.Tensor,
                         programs: int, tiling: Tiling | None = None) -> torch.Tensor:
    """out[band g] = a[band g] @ b[g] for every expert band of ``table`` (split_block_table(rows, bm)
    with bm the tiling's, 128 on a GPU). ``tiling`` as in grouped_mm_tma."""
    return launch_grouped((_grouped_gemm_tma_split, _grouped_gemm_split_tuned), a, b, table, out, programs, tiling)
