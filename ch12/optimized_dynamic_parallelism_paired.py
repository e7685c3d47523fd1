"""Optimized dynamic parallelism, paired levels (CUDA C++): optimized_dynamic_parallelism_lean.py with no
second pass over the grid on the largest levels.

Baseline (baseline_dynamic_parallelism.py): the host launches each of ~17 levels after a D2H copy
of its interval count and a sync.
Optimized: dynamic_parallelism.cu ``dp_paired``: ``dp_lean``'s chain (one host launch, each level
tail-launched by the one before, {cell, k} intervals, the {p, w} table, one atomic a block), changed
where a level holds more intervals than the resident grid has threads (5 blocks of 256 an SM:
168,704 on an H200). Levels 9-12 hold 169K-181K on the pair's inputs, so in ``dp_lean_level`` a few
dozen blocks ran a second pass after their first: interval load, dependent {p, w} load, Simpson, the
block's atomic, one after another. A level whose bound (twice the last count) passes the grid runs
``dp_paired_level<true>``: a thread loads intervals i and i + stride beside the count, copies the
second's {p, w} into shared memory asynchronously (LDGSTS: 48 registers do not hold both), runs the
two Simpsons back to back and takes slots for both with one atomic a block; both children in one
16-byte store. The other levels run ``<false>``, one interval a thread as in ``_lean``. The same
intervals, Simpson code and splits (only the order within the next list differs).
Expect: not yet measured. Estimate (arithmetic, not a measurement): the second pass costs ~1-1.5 us
a level (an L2 load, the dependent {p, w} load, the block's barriers and atomic round trip) on 4
levels, ~4-6 us; less ~0.5 us for the shared-memory round trip of the second interval and the unused
look-ahead loads of the 5 full grids that fit one pass (levels 7, 8, 13-15). About 3.5-5.5 us of
~205-215 us: ~2% (1.5-2.7%), below the 3-5% aimed at; ~82% of the 169 us ceiling on a run where
``_lean`` reads 0.211 ms.
Run: python ch12/optimized_dynamic_parallelism_paired.py  |  aisp bench run -t ch12:dynamic_parallelism
"""

from __future__ import annotations

import ctypes

import torch
from baseline_dynamic_parallelism import LIBRARY
from ch12_common import INT, PTR
from optimized_dynamic_parallelism_lean import Lean, LeanLevels

import aisp
from aisp.kits import native

SIGNATURES = {"dp_paired": [Lean, PTR], "dp_paired_grid": [ctypes.POINTER(INT)]}


class PairedLevels(LeanLevels):
    def prepare(self) -> None:
        """_lean's buffers and struct, with the resident grid of dp_paired_level (the same 5 blocks an SM)."""
        super().prepare()
        self.paired_lib = LIBRARY.load(self.device, SIGNATURES)
        grid = INT(0)
        with torch.cuda.device(self.device):
            native.check(self.paired_lib.dp_paired_grid(ctypes.byref(grid)), "dp_paired_grid")
        self.lean.max_grid = grid.value

    def run(self) -> torch.Tensor:
        native.check(self.paired_lib.dp_paired(self.lean, native.stream(self.device)), "dp_paired")
        return self.out


def get_benchmark() -> aisp.Benchmark:
    return PairedLevels()


if __name__ == "__main__":
    aisp.main(get_benchmark)
