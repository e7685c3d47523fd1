"""Optimized delayed scaling, persistent variant: the delayed-scaled cast by ch19_cast's persistent kernel.

Baseline (baseline_fp8_delayed_scaling.py): dynamic scaling, an amax pass before the one-tile cast kernel.
Optimized: the same delayed scaling as optimized_fp8_delayed_scaling.py (scale from the last 16 amax
values, this tensor's amax recorded in the same pass), with the cast by the persistent kernel of
optimized_fp8_cast_transpose_persistent.py (2 programs per SM, two 64 x 128 tiles of loads in flight
each, one atomic per program). optimized_fp8_delayed_scaling.py stays as the measured reference
(2.33 TB/s, 55% of the HBM copy rate, the one-tile kernel's rate): this variant's gain over that one is
the kernel's, its gain over the baseline is the saved amax pass plus the kernel's.
Expect (measured, H200, 2026-11-27): 0.2564 -> 0.2315 ms, 1.11x (median ratio), 2.32 TB/s, 55.2% of the
HBM copy rate: SLOWER than the reference variant (0.2085 ms, 61.3%) in the same run, not the
0.15-0.18 ms (70-85%) estimated; the persistent kernel lost in fp8_cast_transpose too (not profiled).
Run: python ch19/optimized_fp8_delayed_scaling_persistent.py  |  aisp bench run -t ch19:fp8_delayed_scaling
"""

from __future__ import annotations

import torch
from ch19_fp8 import DelayedScaling
from optimized_fp8_delayed_scaling import DelayedScalingCast

import aisp


class PersistentDelayedScalingCast(DelayedScalingCast):
    def prepare(self) -> None:
        self.history: dict[str, torch.Tensor] = {}
        self.quant = DelayedScaling(self.history, length=self.workload.history, persistent=True)
        self.run()


def get_benchmark() -> aisp.Benchmark:
    return PersistentDelayedScalingCast()


if __name__ == "__main__":
    aisp.main(get_benchmark)
