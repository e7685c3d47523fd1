"""Baseline delayed scaling: dynamic per-tensor fp8 scaling of one large activation (16384 x 8192
bf16, 268 MB): an amax pass, then the fused cast-transpose.

Every fp8 Linear step casts its activation, weight and gradient (fp8_linear_training). Dynamic
scaling scales a tensor by its own amax, so the amax must be known before the cast reads the tensor.
Baseline: one reduction pass (``torch.linalg.vector_norm(inf)``: reads 2 B/element), then the fused
Triton cast-transpose of ch19_cast (reads 2, writes 1 + 1): 6 bytes per element, 805 MB per call.
Optimized (optimized_fp8_delayed_scaling.py): delayed scaling. The scale comes from the largest
amax of the tensor's last 16 casts, known before the tensor is read; the same cast-transpose kernel
records this tensor's amax with an atomic max in its one pass: 4 bytes per element, 537 MB.
The first H200 run measured this pair inside a whole fp8 Linear step (16384 tokens, 2048 x 2048):
1.01x [0.95, 1.09], the saved reads (~40 us) lost in the GEMMs and run-to-run noise; here the saved
read is the whole difference, on the memory-bound cast where it matters.
Expect (measured, H200, 2026-11-27): baseline 0.2564 ms (the same fused kernel plus a 268 MB read);
optimized 0.2085 ms, 1.23x [1.22, 1.24] (estimated 1.3-1.5x), 2.57 TB/s, 61.3% of HBM copy (target
80%); the persistent variant slower, 0.2315 ms, 1.11x, 55.2%. Earlier: 0.2631 -> 0.2304 ms, 1.17x
(2026-11-26); 0.258 -> 0.208 ms, 1.23x (first measurement of this design).
Tolerance: rtol 0.4, rel L2 0.25 (fp8 defaults: 0.25, 0.1), atol the fp8 default. With x fixed the
history holds amax(x) after the first call, so both sides use the same scale and write the same
bytes. On refilled inputs (the harness's checked call) the delayed scale lags by design: the history
holds x's amax, the refilled tensor has its own, and the scale and every e4m3 code differ by their
ratio: rel L2 0.25 passes a history amax from 0.8x to 1.25x the new one (tests/test_ch19_pairs.py);
another seed's tensor errs by ~1.4. The largest of 134M normal draws varies (5.52 to 6.51 from its
1% to its 99% quantile), so with x's own amax a correct run failed that check in 4e-5 of runs at the
median amax, 1.8e-4 averaged over seeds, 7e-4 at the 1% quantile. x's largest |value| is
therefore fixed (``pinned_amax``: 6.5625, about 0.01 values clipped to it): a refilled tensor's amax
then leaves the window in ~3e-8 of runs (``lag_false_alarm``).
Run: python ch19/baseline_fp8_delayed_scaling.py  |  aisp bench run -t ch19:fp8_delayed_scaling
"""

from __future__ import annotations

import math
from statistics import NormalDist

import torch
from baseline_fp8_cast_transpose import cast_workload
from ch19_fp8 import E4M3, DelayedScaling, DynamicScaling

import aisp

WORKLOAD = cast_workload(precision="fp8", rtol=0.4, max_rel_l2=0.25, requires=aisp.Requirements(cuda=True, min_compute_capability=(8, 9),
                                                                      packages=("triton",)),
                         ceiling_note="84-86% in the 6 of 20 samples whose issue fit the spacer (0.148-0.151 ms); "
                                      "the rest waited on a busy 4-GPU host (issue 0.15-0.27 ms)")


def amax_cdf(m: float, n: int) -> float:
    """P(the largest |x| of n N(0, 1) draws <= m)."""
    return math.exp(n * math.log1p(-math.erfc(m / math.sqrt(2))))


def lag_false_alarm(amax: float, n: int, r: float) -> float:
    """How often the harness's refilled call fails a correct delayed scaling: the history holds
    ``amax``, the refilled tensor (n fresh N(0, 1) draws) has its own, and the scale and the codes
    then differ by their ratio, which max_rel_l2 = r holds within [1 / (1 + r), 1 + r]."""
    above = -math.expm1(n * math.log1p(-math.erfc(amax * (1 + r) / math.sqrt(2))))
    return amax_cdf(amax / (1 + r), n) + above


def pinned_amax(n: int, r: float) -> float:
    """The input's largest |value| (bf16): where lag_false_alarm is least, from the median of the
    largest of n draws up to 1.4x it."""
    median = NormalDist().inv_cdf(1 - math.log(2) / (2 * n))
    grid = [float(torch.tensor(median * (1 + k / 200)).bfloat16()) for k in range(81)]
    return min(grid, key=lambda a: lag_false_alarm(a, n, r))


class DynamicScalingCast(aisp.Benchmark):
    workload = WORKLOAD
    inputs = ("x",)

    def setup(self) -> None:
        w = self.workload
        pin = pinned_amax(w.rows * w.cols, w.max_rel_l2)
        x = torch.randn(w.rows, w.cols, generator=self.generator(), device=self.device).clamp_(-pin, pin)
        x[0, 0] = pin  # the amax, fixed: see Tolerance
        self.x = x.bfloat16()
        self.prepare()

    def prepare(self) -> None:
        """Untimed: build the scaler, warm the kernels."""
        self.quant: DynamicScaling | DelayedScaling = DynamicScaling()
        self.run()

    def run(self) -> tuple[torch.Tensor, ...]:
        out = self.quant("x", self.x, E4M3)
        return out.q, out.qt, out.scale


def get_benchmark() -> aisp.Benchmark:
    return DynamicScalingCast()


if __name__ == "__main__":
    aisp.main(get_benchmark)
