"""The TMA grouped GEMM with 64-row tail tiles, each tile shape in its own flattened loop.

``_tma`` (ch14_grouped_tma.py) covers every band with 128-row blocks: 18.6% of the 20,864 rows it
multiplies on the pair's routing are padding. ``_tma_split`` (ch14_grouped_tma_split.py) ends the 33
bands whose remainder is 1-64 rows in a 64-row block (padding 9.4%, the least any 64-row granularity
gives) but branches on the block height inside the tile loop, which Triton then cannot flatten into
the K loop: every tile drains its pipeline, and the H200 measured it no faster than ``_tma``.

Here the branch leaves the loop. The host turns split_block_table's blocks into a static schedule
(``tail_schedule``, once per routing and SM count, in the pair's setup): each program runs up to
three flattened loops, 128-row tiles, then its share of 64-row tiles (ceil(tails / programs): 2 on
132 SMs), then 128-row tiles again. Each loop is ``_tma``'s software-pipelined, flattened walk with
one tile shape, so a program drains its pipeline at most twice (once if its tails come first or
last) instead of at every tile. The schedule is a list-scheduling simulation over the tiles in band
order (a band's 64-row block after its 128-row ones) at modelled costs (a 128-row tile 1, a 64-row
tile F_TAIL / 2, a loop switch SWITCH): a band's tail tiles go to the first program still owing its
tail run when the walk reaches them, so they run about when the band's tall tiles read the
expert's weights (kept in L2); the others take the next 128-row tile in band order, those still
owing a tail run counted as later by its cost, so the runs end together.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import triton
import triton.language as tl
from ch14_grouped_tma import BM, CONFIGS, _ab_descriptors, check_tma_operands
from ch14_grouped_tma_split import _block_tile, split_block_table
from optimized_triton_grouped_gemm import Tiling

from aisp.kits.tma import use_torch_scratch

BN = 256
"""Tile width of every config here: the schedule numbers tiles (block * N / BN + column block)."""
TAIL_CONFIGS = [c for c in CONFIGS if c.kwargs["BN"] == BN]
F_TAIL = 1.2
"""Modelled time of a 64-row tile over half a 128-row one's (more L2 bytes and fixed cost per FLOP)."""
SWITCH = 0.08
"""Modelled cost of a switch between loops (a pipeline drain and refill, ~2 us) in 128-row tiles (~26 us)."""


class TailTable(NamedTuple):
    """Blocks (expert, first row, end row) as int32; ``items``: tile numbers, program after program;
    ``bounds`` [programs, 4]: a program's 128-row tiles are items[b0:b1] and items[b2:b3], its 64-row
    ones items[b1:b2]; ``bn``: the tile width the items count in; ``makespan``: modelled, in 128-row tiles."""
    group: torch.Tensor
    start: torch.Tensor
    end: torch.Tensor
    items: torch.Tensor
    bounds: torch.Tensor
    bn: int
    makespan: float


def tail_schedule(rows: list[int], bm: int, tiles_n: int, programs: int, device: torch.device,
                  f_tail: float = F_TAIL, switch: float = SWITCH, bn: int = BN) -> TailTable:
    """The static schedule of split_block_table(rows, bm)'s tiles on ``programs`` programs (module doc)."""
    group, start, end, height = split_block_table(rows, bm, torch.device("cpu"))
    tall = height.tolist()
    tails = sum(h != bm for h in tall) * tiles_n
    per = -(-tails // programs) if tails else 1
    owe = per * f_tail / 2 + 2 * switch
    free, runs = [0.0] * programs, [([], [], []) for _ in range(programs)]
    owing, chunk, left = set(range(programs)), None, -(-tails // per)
    for block, h in enumerate(tall):
        for col in range(tiles_n):
            item = block * tiles_n + col
            if h != bm:
                if chunk is None or len(runs[chunk][1]) == per:
                    chunk = min(owing, key=lambda p: (free[p], p))
                    owing.discard(chunk)
                    left -= 1
                    free[chunk] += switch if runs[chunk][0] else 0.0
                runs[chunk][1].append(item)
                free[chunk] += f_tail / 2
                continue
            share = owe * left / len(owing) if owing else 0.0
            p = min(range(programs), key=lambda p: (free[p] + (share if p in owing else 0.0), p))
            after = p not in owing
            free[p] += switch if after and runs[p][1] and not runs[p][2] else 0.0
            runs[p][2 if after else 0].append(item)
            free[p] += 1.0
    items, bounds = [], []
    for run in runs:
        bounds.append([len(items), len(items) + len(run[0]), len(items) + len(run[0]) + len(run[1])])
        items += run[0] + run[1] + run[2]
        bounds[-1].append(len(items))
    as_i32 = lambda v: torch.tensor(v, dtype=torch.int32, device=device)  # noqa: E731
    return TailTable(group.to(device), start.to(device), end.to(device), as_i32(items), as_i32(bounds), bn,
                     max(free))


@triton.jit
def _tile_run(a_desc, b_desc, c_ptr, blk_group, blk_start, blk_end, items, lo, hi, tiles_n, N, K,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """Tiles items[lo:hi], all BM rows high: _grouped_gemm_tma's flattened, pipelined tile loop."""
    for i in tl.range(lo, hi, flatten=True):
        item = tl.load(items + i)
        mb = item // tiles_n
        _block_tile(a_desc, b_desc, c_ptr, tl.load(blk_start + mb), tl.load(blk_end + mb), tl.load(blk_group + mb) * K,
                    (item % tiles_n) * BN, N, K, BM, BN, BK)


@triton.jit
def _grouped_gemm_tma_tails(a_ptr, b_ptr, c_ptr, blk_group, blk_start, blk_end, items, bounds, rows, experts, N, K,
                            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """Program p: its BM-row tiles items[b0:b1], BM // 2-row tiles items[b1:b2], BM-row items[b2:b3]."""
    SHORT: tl.constexpr = BM // 2
    tall_desc, b_desc = _ab_descriptors(a_ptr, b_ptr, rows, experts, N, K, BM, BN, BK)
    short_desc = tl.make_tensor_descriptor(a_ptr, shape=[rows, K], strides=[K, 1], block_shape=[SHORT, BK])
    tiles_n = N // BN
    own = bounds + 4 * tl.program_id(0)
    b1, b2 = tl.load(own + 1), tl.load(own + 2)
    _tile_run(tall_desc, b_desc, c_ptr, blk_group, blk_start, blk_end, items, tl.load(own), b1, tiles_n, N, K, BM, BN, BK)
    _tile_run(short_desc, b_desc, c_ptr, blk_group, blk_start, blk_end, items, b1, b2, tiles_n, N, K, SHORT, BN, BK)
    _tile_run(tall_desc, b_desc, c_ptr, blk_group, blk_start, blk_end, items, b2, tl.load(own + 3), tiles_n, N, K,
              BM, BN, BK)


_grouped_gemm_tails_tuned = triton.autotune(TAIL_CONFIGS, key=["N", "K", "experts"])(_grouped_gemm_tma_tails)


def grouped_mm_tma_tails(a: torch.Tensor, b: torch.Tensor, table: TailTable, out: torch.Tensor,
                         tiling: Tiling | None = None) -> torch.Tensor:
    """out[band g] = a[band g] @ b[g] for every band of ``table`` (tail_schedule(rows, bm, N // bn, ...)),
    one program per row of table.bounds. ``tiling`` None autotunes over TAIL_CONFIGS on a GPU (bm 128,
    bn 256); a given tiling (its bm and bn the table's) launches once with it, as the CPU tests do."""
    experts, k, n = b.shape
    args = (a, b, out, table.group, table.start, table.end, table.items, table.bounds, a.shape[0], experts, n, k)
    grid = (table.bounds.shape[0],)
    if tiling is None and a.is_cuda:
        if table.bn != BN:
            raise ValueError(f"grouped_mm_tma_tails: the autotuned configs are {BN} columns wide, the table {table.bn}")
        check_tma_operands(a, b, out, max(c.kwargs["BK"] for c in TAIL_CONFIGS), table.bn)
        use_torch_scratch()
        _grouped_gemm_tails_tuned[grid](*args, BM=BM)
        return out
    tiling = tiling or Tiling(bm=BM, bn=table.bn)
    if tiling.bn != table.bn:
        raise ValueError(f"grouped_mm_tma_tails: the table counts {table.bn}-column tiles, the tiling {tiling.bn}")
    check_tma_operands(a, b, out, tiling.bk, tiling.bn)
    if a.is_cuda:
        use_torch_scratch()
    _grouped_gemm_tma_tails[grid](*args, BM=tiling.bm, BN=tiling.bn, BK=tiling.bk, num_warps=tiling.warps,
                                  num_stages=tiling.stages)
    return out
