"""Optimized arithmetic intensity, unrolled (CUDA C++): 4 floats per thread, same 8 passes.

Baseline (baseline_arithmetic_intensity.py): 8 passes, one float per thread, 92 bytes and
16 FLOPs per element (0.17 FLOP/byte).
Optimized: each thread loads 4 floats a block-width apart before computing (unrolled,
independent loads in flight: more memory-level parallelism per thread). Same 8 passes, same
92 bytes per element.
Expect: ~1.25x on an H200 (3.0 -> 3.9 TB/s effective): 4 independent loads in flight per
thread cover more DRAM latency; after that the 92 bytes per element are the floor.
Run: python ch01/optimized_arithmetic_intensity_unrolled.py  |  aisp bench run -t ch01:arithmetic_intensity
"""

from __future__ import annotations

from baseline_arithmetic_intensity import Polynomial

import aisp


class UnrolledPolynomial(Polynomial):
    variant = 1


def get_benchmark() -> aisp.Benchmark:
    return UnrolledPolynomial()


if __name__ == "__main__":
    aisp.main(get_benchmark)
