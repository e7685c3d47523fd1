"""Optimized dynamic parallelism, lean levels (CUDA C++): the tail-launched chain of
optimized_dynamic_parallelism.py with less between one device launch and the next.

Baseline (baseline_dynamic_parallelism.py): the host launches each of ~17 levels after a D2H copy
of its interval count and a sync.
Optimized: dynamic_parallelism.cu ``dp_lean``: one host launch, each level tail-launches the next
(``cudaStreamTailLaunch``) as in optimized_dynamic_parallelism.py, aimed at what its profile showed
(a level kernel's own ~8 us beside the 10.2 us link; 60 registers, so its 8-blocks-an-SM grid ran
in two waves). An interval is {cell, k}, 8 bytes instead of 24 ([k, k + 1] * 2^-level: exact, the
baseline's bits); each cell's {p, w} is worked out once a call, not per interval (no tanh, exp10 or
dependent u/v load in a level); a block takes its children's slots with one atomic, not one a warp;
block 0 only sizes (at most twice this level's count, at most what is resident: 5 blocks an SM, 48
registers) and launches the next level while the others refine; the first grid also seeds the list
and resets the counts (one host launch, no memset or seed kernel). Same Simpson code, same splits.
Expect (measured, H200, 2026-11-29, two runs of 20 samples): 0.2467 / 0.2162 ms against the
optimized's 0.3400 / 0.3084 in the same runs (1.38-1.43x), 68-78% of the 169 us ceiling (estimated
200-240 us).
Run: python ch12/optimized_dynamic_parallelism_lean.py  |  aisp bench run -t ch12:dynamic_parallelism
"""

from __future__ import annotations

import ctypes

import torch
from baseline_dynamic_parallelism import LIBRARY, HostLevels
from ch12_common import DBL, INT, PTR
from optimized_dynamic_parallelism import DeviceLevels

import aisp
from aisp.kits import native


class Lean(ctypes.Structure):
    """The Lean struct of dynamic_parallelism.cu, passed by value."""

    _fields_ = [("list", PTR * 2), ("count", PTR), ("out", PTR), ("u", PTR), ("v", PTR), ("shape", PTR),
                ("cells", INT), ("cap", INT), ("max_levels", INT), ("max_grid", INT), ("tol", DBL)]


SIGNATURES = {"dp_lean": [Lean, PTR], "dp_lean_grid": [ctypes.POINTER(INT)]}


class LeanLevels(DeviceLevels):
    scratch = (*HostLevels.scratch, "shape")

    def prepare(self) -> None:
        """The {p, w} table, the resident grid of a level and the struct dp_lean takes. The lists are
        the baseline's buffers, read as {cell, k} pairs (8 of each list's 24 bytes an interval)."""
        w = self.workload
        self.lean_lib = LIBRARY.load(self.device, SIGNATURES)
        self.shape = torch.empty(w.cells, 2, dtype=torch.float64, device=self.device)
        grid = INT(0)
        with torch.cuda.device(self.device):
            native.check(self.lean_lib.dp_lean_grid(ctypes.byref(grid)), "dp_lean_grid")
        self.lean = Lean((PTR * 2)(self.lists[0].data_ptr(), self.lists[1].data_ptr()), self.count.data_ptr(),
                         self.out.data_ptr(), self.u.data_ptr(), self.v.data_ptr(), self.shape.data_ptr(),
                         w.cells, w.cap, w.max_levels, grid.value, w.tol)

    def run(self) -> torch.Tensor:
        native.check(self.lean_lib.dp_lean(self.lean, native.stream(self.device)), "dp_lean")
        return self.out


def get_benchmark() -> aisp.Benchmark:
    return LeanLevels()


if __name__ == "__main__":
    aisp.main(get_benchmark)
