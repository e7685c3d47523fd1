"""Optimized arithmetic intensity, fused (CUDA C++): all 8 Horner steps in one pass.

Baseline (baseline_arithmetic_intensity.py): 8 passes, one float per thread, 92 bytes and
16 FLOPs per element (0.17 FLOP/byte).
Optimized: one kernel reads x once, applies all 8 steps in registers and writes y once
(float4): 8 bytes per element, 2 FLOP/byte, 11.5x the baseline's intensity; the polynomial's
intermediate values never touch memory.
Expect: 8-11x on an H100/H200 (92/8 bytes, less the fixed launch and tail cost of a ~25 us
kernel); the fused kernel should stream at >= 80% of the HBM copy bandwidth.
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
