"""Optimized arithmetic intensity, vectorized (CUDA C++): float4 loads and stores, same 8 passes.

Baseline (baseline_arithmetic_intensity.py): 8 passes, one float per thread, 92 bytes and
16 FLOPs per element (0.17 FLOP/byte).
Optimized: each thread moves 4 contiguous floats with one 128-bit load and one 128-bit
store (4x fewer memory instructions). Same 8 passes, same 92 bytes per element.
Expect: ~1.25x on an H200, the same as the unrolled variant (16 bytes in flight per thread
either way); the bytes, not the instruction count, then set the time.
Run: python ch01/optimized_arithmetic_intensity_vectorized.py  |  aisp bench run -t ch01:arithmetic_intensity
"""

from __future__ import annotations

from baseline_arithmetic_intensity import Polynomial

import aisp


class VectorizedPolynomial(Polynomial):
    variant = 2


def get_benchmark() -> aisp.Benchmark:
    return VectorizedPolynomial()


if __name__ == "__main__":
    aisp.main(get_benchmark)
