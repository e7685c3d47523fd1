"""Baseline ILP accumulators (CUDA C++): one long dependent FMA chain per thread.

Baseline: 33,792 points (one 256-thread block per SM on an H100/H200), each evaluating a
polynomial of degree 262,143 whose coefficients repeat every 8 (ilp_accumulators.cu,
``horner_chain``): acc = fma(acc, x, c[k % 8]), each FMA waiting ~4 cycles for the previous one.
Each SM scheduler has 2 warps, so it issues an FMA at most every other cycle: the kernel is
latency-bound at <= 50% of the FP32 FMA peak. Few, long computations are where this bites
(per-row reductions of a short, wide matrix, long recurrences); with many short ones, more threads
hide the latency instead.
Optimized (optimized_ilp_accumulators.py): the same sum as 8 independent chains in x^8
(``horner_split``), combined at the end: 8 FMAs in flight per warp. Same FMAs (+17), a different
rounding order, checked at fp32 tolerance. Both clamp x to [-0.9, 0.9] (``limit``): the series
converges for |x| < 1, and beyond it x^k overflows fp32, differently in the two orders (Inf, NaN).
Expect: measured on an H200 (re-run after the clamp): 0.729 ms → 0.325 ms, 2.24x [2.22, 2.27];
the baseline at 24.3 TFLOP/s, 36% of the FP32 FMA peak of ~67 TFLOP/s at 1.98 GHz (fp32 matmul
measures 51), the optimized at 54.5 TFLOP/s, 81%.
Run: python ch06/baseline_ilp_accumulators.py  |  aisp bench run -t ch06:ilp_accumulators
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch06_common import FLOAT, HERE, INT, LONG, PTR

import aisp
from aisp.kits import native


@dataclass(frozen=True, kw_only=True)
class ChainWorkload(aisp.Workload):
    points: int = 132 * 256
    """Polynomials evaluated, one per thread: one 256-thread block on each of 132 SMs."""
    steps: int = 1 << 18
    """FMAs per point (the degree + 1), a multiple of 8."""
    pattern: int = 8
    """Distinct coefficients, repeating."""
    limit: float = 0.9
    """Both kernels clamp x to [-limit, limit], inside the series' radius of convergence (|x| < 1)."""


def _workload() -> ChainWorkload:
    s = ChainWorkload()
    return ChainWorkload(flops=2.0 * s.points * s.steps, bytes=8.0 * s.points, items=s.points,
                         # fp32_simt: one FFMA chain per point on the CUDA cores, the lesson's FP32 FMA peak
                         item_unit="points", precision="fp32_simt", requires=native.REQUIRES)


WORKLOAD = _workload()
LIBRARY = native.Library((HERE / "ilp_accumulators.cu",))


def draw_points(w: ChainWorkload, gen: torch.Generator, device: torch.device) -> torch.Tensor:
    """Uniform in [-limit, limit)."""
    return (torch.rand(w.points, device=device, generator=gen) * 2 - 1) * w.limit


def closed_form(x: torch.Tensor, coef: torch.Tensor, steps: int, limit: float) -> torch.Tensor:
    """sum_k coef[k % 8] v^(steps-1-k) in float64, v = x clamped to [-limit, limit]:
    (sum_j coef[j] v^(7-j)) (1 - y^(steps/8)) / (1 - y), y = v^8."""
    xd, cd = x.double().clamp(-limit, limit), coef.double()
    head = sum(cd[j] * xd ** (len(cd) - 1 - j) for j in range(len(cd)))
    y = xd ** len(cd)
    return (head * (1 - y ** (steps // len(cd))) / (1 - y)).float()


class DependentChain(aisp.Benchmark):
    """One Horner chain per point (``horner_chain``)."""

    workload = WORKLOAD
    inputs = ("x",)
    scratch = ("out",)
    split = 0

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        self.lib = LIBRARY.load(self.device, {"ilp_run": [INT, PTR, PTR, PTR, INT, LONG, FLOAT, PTR]})
        self.x = draw_points(w, gen, self.device)
        self.coef = torch.randn(w.pattern, device=self.device, generator=gen)
        self.out = torch.empty_like(self.x)
        reference = closed_form(self.x, self.coef, w.steps, w.limit)
        torch.testing.assert_close(self.run(), reference, rtol=1e-4, atol=1e-4)

    def run(self) -> torch.Tensor:
        w = self.workload
        status = self.lib.ilp_run(self.split, self.x.data_ptr(), self.coef.data_ptr(), self.out.data_ptr(),
                                  w.points, w.steps, w.limit, native.stream(self.device))
        native.check(status, type(self).__name__)
        return self.out


def get_benchmark() -> aisp.Benchmark:
    return DependentChain()


if __name__ == "__main__":
    aisp.main(get_benchmark)
