"""Optimized arithmetic intensity, fused (CUDA C++): all 8 Horner steps in one pass.

Baseline (baseline_arithmetic_intensity.py): 8 passes, one float per thread, 92 bytes and
16 FLOPs per element (0.17 FLOP/byte).
Optimized: one kernel reads x once, applies all 8 steps in registers and writes y once
(float4): 8 bytes per element, 2 FLOP/byte, 11.5x the baseline's intensity; the polynomial's
intermediate values never touch memory.
Expect: 7.5-9x on an H200 in the harness (92/8 = 11.5x in bytes, less the 12-19 us of launch
latency a single timed call carries); ~14x and 86% of the HBM copy bandwidth in the
standalone binary's back-to-back loop.
Run: python ch01/optimized_arithmetic_intensity_fused.py  |  aisp bench run -t ch01:arithmetic_intensity
"""

from __future__ import annotations

from baseline_arithmetic_intensity import Polynomial

import aisp


class FusedPolynomial(Polynomial):
    variant = 4


def get_benchmark() -> aisp.Benchmark:
    return FusedPolynomial()


if __name__ == "__main__":
    aisp.main(get_benchmark)
