"""Baseline bank conflicts (CUDA C++): Q K^T per 32x32 tile, K read by columns from a [32][32] tile.

Baseline: attention scores S = Q K^T for 32,768 tiles of 32 queries x 32 keys x head dim 32, fp32
(bank_conflicts.cu, ``scores<0>``). Lane j of each warp computes S[i][j], so at each step the
warp reads a column of the K tile. In a [32][32] tile a column's 32 words are 128 bytes apart,
all in one of shared memory's 32 banks: a 32-way conflict, the load replayed 32 times. (ptxas
merges four steps into one 128-bit load: still 32 passes, now per 4 steps, and 42 registers per
thread, so 5 blocks per SM instead of the padded kernel's 8.)
Optimized (optimized_bank_conflicts.py): the K tile declared [32][33] (``scores<1>``): row j
starts one bank later, so a column's 32 words land in 32 different banks: one pass per load.
Same loads, same FMAs in the same order: bitwise the same answer.
Expect: measured on an H200: 0.381 -> 0.167 ms, 2.29x [2.28, 2.30]; the padded kernel at
2,415 GB/s (57% of the 4.2 TB/s copy ceiling; 12 KiB and 65,536 FLOPs per tile: 5.3 FLOP/byte,
under the fp32 ridge of 12), short of HBM for a reason not profiled.
Run: python ch06/baseline_bank_conflicts.py  |  aisp bench run -t ch06:bank_conflicts
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch06_common import HERE, INT, PTR

import aisp
from aisp.kits import native


@dataclass(frozen=True, kw_only=True)
class TileWorkload(aisp.Workload):
    tiles: int = 32768
    """32x32 Q and K tiles; 128 MiB each, S another 128 MiB."""
    tile: int = 32
    """Rows and head dimension of a tile: must match kTile in bank_conflicts.cu."""


def _workload() -> TileWorkload:
    s = TileWorkload()
    per_tile = s.tile * s.tile
    return TileWorkload(flops=2.0 * s.tiles * per_tile * s.tile, bytes=12.0 * s.tiles * per_tile,
                        items=s.tiles, item_unit="tiles", precision="fp32", requires=native.REQUIRES,
                        ceiling_note="ncu: the padded kernel's L1/shared pipe 94% busy, DRAM 53%; the swizzled one (4x4 of S a thread, LDS.128) reads a third of the wavefronts")


WORKLOAD = _workload()
LIBRARY = native.Library((HERE / "bank_conflicts.cu",))


class ColumnReadScores(aisp.Benchmark):
    """S = Q K^T per tile with an unpadded K tile (``scores<0>``)."""

    workload = WORKLOAD
    inputs = ("q", "k")
    scratch = ("s",)
    layout = 0
    """scores_run's layout: 0 [32][32] K tile, 1 [32][33], 2 scores_swizzled."""

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        self.lib = LIBRARY.load(self.device, {"scores_run": [INT, PTR, PTR, PTR, INT, PTR]})
        shape = (w.tiles, w.tile, w.tile)
        self.q = torch.randn(shape, device=self.device, generator=gen)
        self.k = torch.randn(shape, device=self.device, generator=gen)
        self.s = torch.empty(shape, device=self.device)
        expected = torch.bmm(self.q.double(), self.k.double().transpose(1, 2)).float()
        torch.testing.assert_close(self.run(), expected, rtol=1e-4, atol=1e-4)

    def run(self) -> torch.Tensor:
        status = self.lib.scores_run(self.layout, self.q.data_ptr(), self.k.data_ptr(), self.s.data_ptr(),
                                     self.workload.tiles, native.stream(self.device))
        native.check(status, type(self).__name__)
        return self.s


def get_benchmark() -> aisp.Benchmark:
    return ColumnReadScores()


if __name__ == "__main__":
    aisp.main(get_benchmark)
