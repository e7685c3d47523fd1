"""Baseline for the Transformer Engine fp8 pair: an 8192^3 bf16 linear layer.

Baseline: ``F.linear(x, w)`` in bf16 (the same layer as baseline_precisionfp8.py, smaller).
Optimized (optimized_precisionfp8_te.py): Transformer Engine's ``te.Linear`` under
``te.fp8_autocast`` with a delayed-scaling recipe (HYBRID: e4m3 forward; scales from an amax
history), calibrated in setup(): TE's own fp8 GEMM path with scaling managed by the library.
Expect: 1.5-1.8x on an H100/H200, like the hand-written ``torch._scaled_mm`` pair.
Needs: the ``transformer_engine`` package (skipped with that reason where it is missing; our
H200 image has none, so this pair has not been measured).
Tolerance: fp8 e4m3 operands, outputs ~N(0, 1): element_tol 0.08 (0.5 at max |out| ~6), rtol 0
(see baseline_precisionfp8.py).
Run: python ch13/optimized_precisionfp8_te.py --validate  |  aisp bench run -t ch13:precisionfp8_te
"""

from __future__ import annotations

from baseline_precisionfp8 import BF16Linear, linear_workload

import aisp

WORKLOAD = linear_workload(tokens=8192, d_in=8192, d_out=8192, precision="fp8", element_tol=0.08, rtol=0.0,
                           requires=aisp.Requirements(cuda=True, min_compute_capability=(8, 9),
                                                      packages=("transformer_engine",)))


class BF16LinearReference(BF16Linear):
    workload = WORKLOAD


def get_benchmark() -> aisp.Benchmark:
    return BF16LinearReference()


if __name__ == "__main__":
    aisp.main(get_benchmark)
