"""Optimized arithmetic intensity, more FLOPs per byte (CUDA C++): 4 Horner steps per pass, 2 passes.

Baseline (baseline_arithmetic_intensity.py): 8 passes, one float per thread, 92 bytes and
16 FLOPs per element (0.17 FLOP/byte).
Optimized: each pass applies 4 Horner steps to the value it loaded (float4), so 16 FLOPs
cost 20 bytes per element instead of 92: 0.8 FLOP/byte, 4.6x the baseline's intensity.
Expect: 4.5-4.9x on an H200 (time follows bytes: 92/20 = 4.6).
Run: python ch01/optimized_arithmetic_intensity_more_flops.py  |  aisp bench run -t ch01:arithmetic_intensity
"""

from __future__ import annotations

from baseline_arithmetic_intensity import Polynomial

import aisp


class MoreFlopsPolynomial(Polynomial):
    variant = 3


def get_benchmark() -> aisp.Benchmark:
    return MoreFlopsPolynomial()


if __name__ == "__main__":
    aisp.main(get_benchmark)
