"""Optimized dynamic parallelism, levels that look ahead (CUDA C++): optimized_dynamic_parallelism_lean.py's
chain without its last grid, which finds no interval.

Baseline (baseline_dynamic_parallelism.py): the host launches each of ~17 levels after a D2H copy
of its interval count and a sync.
Optimized: dynamic_parallelism.cu ``dp_ahead``: the lean levels (one host launch, each level
tail-launched by the one before from its block 0 at its start, {cell, k} intervals, a {p, w}
table, one slot atomic a block), but a level is launched only if it will hold intervals. _lean
launches level L + 1 before level L has tested any interval, so its chain runs 18 grids, the last
empty: 17 device launches where the ceiling counts 16. Here level L - 1 decides: a level that
has shrunk to at most half its grid's threads (on these inputs only the last two, ~74K and ~17K
intervals) also runs the split test on both halves of each interval it splits (the same
simpson(), one half then the other) and marks "level L + 1 may hold intervals" if one would
split; every other level marks it untested. The mark errs one way only (a half at half its
threshold counts), so a level can come back empty but never be left out; the intervals and their
splits are _lean's, bit for bit.
Expect: not yet measured. Estimate (arithmetic, not a measurement): one link fewer, -10.2 us
(an empty grid: its tail launch and one count load), plus ~0.3-1 us for level 15's look-ahead
(two more Simpson tests on ~9K threads, after its list stores) and two more divisions on each
launching thread: from _lean's 0.2154 / 0.2195 ms to ~0.206-0.211 ms, ~80-82% of the 169 us
ceiling.
Run: python ch12/optimized_dynamic_parallelism_ahead.py  |  aisp bench run -t ch12:dynamic_parallelism
"""

from __future__ import annotations

import ctypes

import torch
from baseline_dynamic_parallelism import LIBRARY
from ch12_common import INT, PTR
from optimized_dynamic_parallelism_lean import Lean, LeanLevels

import aisp
from aisp.kits import native

SIGNATURES = {"dp_ahead": [Lean, PTR, PTR], "dp_ahead_grid": [ctypes.POINTER(INT)]}


class AheadLevels(LeanLevels):
    scratch = (*LeanLevels.scratch, "ahead")

    def prepare(self) -> None:
        """_lean's buffers and struct, with dp_ahead_level's resident grid and the marks (one int a level)."""
        super().prepare()
        self.ahead_lib = LIBRARY.load(self.device, SIGNATURES)
        self.ahead = torch.empty(self.workload.max_levels, dtype=torch.int32, device=self.device)
        grid = INT(0)
        with torch.cuda.device(self.device):
            native.check(self.ahead_lib.dp_ahead_grid(ctypes.byref(grid)), "dp_ahead_grid")
        self.lean.max_grid = grid.value

    def run(self) -> torch.Tensor:
        native.check(self.ahead_lib.dp_ahead(self.lean, self.ahead.data_ptr(), native.stream(self.device)), "dp_ahead")
        return self.out


def get_benchmark() -> aisp.Benchmark:
    return AheadLevels()


if __name__ == "__main__":
    aisp.main(get_benchmark)
