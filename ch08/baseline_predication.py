"""Baseline predication (CUDA C++): an odd function written as a branch on the sign, warps diverge.

Baseline: y = sign(x) * P(|x|) on 32M fp32 elements, x clamped to [-1, 1] and P the 128-term series
of ch08_poly.cuh (128 FMAs per element), written as the definition reads: ``if (x < 0) y = -P(-x);
else y = P(x);`` (odd_branch.cu, ``odd_branchy``). Signs are random, so nearly every warp holds both
signs and runs both sides one after the other, each with about half its lanes masked off: 256 FMA
instructions issued per element, half of them for lanes that discard the result.
Optimized (optimized_predication.py): one path for every lane, r = P(|x|), then a branchless select
y = x < 0 ? -r : r: 128 FMAs issued per element, all lanes busy. Bitwise-equal results.
8.6 GFLOP of useful work per call, 256 MiB moved.
Expect: 1.57x [1.56, 1.59] measured on an H200 (0.330 -> 0.210 ms); the optimized at 40.8 TFLOP/s useful,
61% of the FP32 FMA peak (~67 TFLOP/s; baseline 26.0 useful, 52 issued).
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
                       ceiling_note="profiled (ncu, H200): odd_select 195 us: issue 80% of cycles, FMA pipe 68% (128 of a warp's 153 instructions FFMA), long_scoreboard 5.1 on its one load")


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
