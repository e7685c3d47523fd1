"""Optimized delayed scaling, persistent variant: the delayed-scaled cast by ch19_cast's persistent kernel.

Baseline (baseline_fp8_delayed_scaling.py): dynamic scaling, an amax pass before the one-tile cast kernel.
Optimized: the same delayed scaling as optimized_fp8_delayed_scaling.py (scale from the last 16 amax
values, this tensor's amax recorded in the same pass), with the cast by the persistent kernel of
optimized_fp8_cast_transpose_persistent.py (2 programs per SM, two 64 x 128 tiles of loads in flight
each, one atomic per program). optimized_fp8_delayed_scaling.py stays as the measured reference
(2.33 TB/s, 55% of the HBM copy rate, the one-tile kernel's rate): this variant's gain over that one is
the kernel's, its gain over the baseline is the saved amax pass plus the kernel's.
Expect (estimated, not yet measured): 0.15-0.18 ms on 537 MB (3.0-3.6 TB/s, 70-85% of the HBM copy
rate), against 0.2304 ms for the reference variant and 0.2631 ms for the baseline on the H200.
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
