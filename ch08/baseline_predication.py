"""Baseline predication (CUDA C++): an odd function written as a branch on the sign, warps diverge.

Baseline: y = sign(x) * P(|x|) on 32M fp32 elements, x clamped to [-1, 1] and P the 128-term series
of ch08_poly.cuh (128 FMAs per element), written as the definition reads: ``if (x < 0) y = -P(-x);
else y = P(x);`` (odd_branch.cu, ``odd_branchy``). Signs are random, so nearly every warp holds both
signs and runs both sides one after the other, each with about half its lanes masked off: 256 FMA
instructions issued per element, half of them for lanes that discard the result.
Optimized (optimized_predication.py): one path for every lane, r = P(|x|), then a branchless select
y = x < 0 ? -r : r: 128 FMAs issued per element, all lanes busy. Bitwise-equal results.
Both run the same body (``unit_steps`` in ch08_poly.cuh) on a grid of SMs x 8 resident 256-thread blocks: 4 elements
a thread a step, the next step's loads issued amid this step's chains, so 512 of the select loop's
549 SASS instructions are FFMA (1,024 of 1,077 in the branchy loop; was one element a thread, 128 of
154). 8.6 GFLOP of useful work per call, 256 MiB moved.
Expect: measured, H200, 2026-11-29, the 4-element body, twice: 1.93x [1.93, 1.93] (0.2987 -> 0.1548
ms); the optimized at 55.5 TFLOP/s useful, 88% of the measured FFMA rate (62.8; one element a thread:
69%); the baseline issues twice its useful FMAs.
Run: python ch08/baseline_predication.py  |  aisp bench run -t ch08:predication
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch08_common import BITWISE, INT, LONG, PTR, bind, call, library, series

import aisp
from aisp.kits import native


@dataclass(frozen=True, kw_only=True)
class OddWorkload(aisp.Workload):
    n: int = 1 << 25
    terms: int = 128


def _workload() -> OddWorkload:
    s = OddWorkload()
    return OddWorkload(flops=2.0 * s.terms * s.n, bytes=8.0 * s.n, items=s.n, item_unit="elements",
                       # fp32_simt: per-element FFMA chains on the CUDA cores, no tensor-core form; bitwise-equal: zero tolerance
                       precision="fp32_simt", **BITWISE, requires=native.REQUIRES,
                       ceiling_note="profiled (ncu, H200): odd_select 152.9 us, SM 93.4%, stalls not_selected 8.2 (issue-bound), long_scoreboard 0.8: 88% since the 4-element body")


WORKLOAD = _workload()
LIBRARY = library("odd_branch.cu")


def odd_reference(x: torch.Tensor, terms: int) -> torch.Tensor:
    """sign(x) * P(|x|) in float64, x clamped to [-1, 1]."""
    v = x.double().clamp(-1, 1)
    return torch.where(v < 0, -series(v.abs(), terms), series(v, terms))


class BranchyOdd(aisp.Benchmark):
    """y = sign(x) P(|x|) with a data-dependent branch."""

    workload = WORKLOAD
    inputs = ("x",)
    scratch = ("y",)
    mode = 0
    """0: branch on the sign, 1: one path and a select (odd_branch.cu)."""

    def setup(self) -> None:
        w = self.workload
        self.run_fn = bind(LIBRARY.load(self.device), "odd_run", [INT, PTR, PTR, LONG, PTR])
        self.x = torch.randn(w.n, generator=self.generator(), device=self.device) * 0.5
        self.y = torch.empty_like(self.x)
        sample = slice(0, 1 << 20)
        torch.testing.assert_close(self.run()[sample].double(), odd_reference(self.x[sample], w.terms),
                                   rtol=1e-5, atol=1e-5)

    def run(self) -> torch.Tensor:
        call(self.run_fn, self.mode, self.x.data_ptr(), self.y.data_ptr(), self.workload.n,
             native.stream(self.device))
        return self.y


def get_benchmark() -> aisp.Benchmark:
    return BranchyOdd()


if __name__ == "__main__":
    aisp.main(get_benchmark)
