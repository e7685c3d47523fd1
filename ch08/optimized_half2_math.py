"""Optimized half2 math (CUDA C++): packed __half2 arithmetic, two fp16 FMAs per instruction.

Baseline (baseline_half2_math.py): fp16 data widened to fp32, two chains of 128 FFMAs per thread.
Optimized: ``poly_half2`` (half2_poly.cu): clamp with ``__hmax2``/``__hmin2`` and Horner's rule with
``__hfma2`` on the packed pair: 128 HFMA2 per thread, each coefficient an immediate pair. Half the
instructions for the same FMAs; fp16 rounding at every step (within fp16 tolerance: see the
baseline's header).
Expect: 1.13x [1.12, 1.13] measured on an H200 (0.342 -> 0.303 ms), 56.7 TFLOP/s: 42% of fp16 SIMT.
Run: python ch08/optimized_half2_math.py  |  aisp bench run -t ch08:half2_math
"""

from __future__ import annotations

from baseline_half2_math import Fp32MathOnHalf

import aisp


class Half2Math(Fp32MathOnHalf):
    mode = 1


def get_benchmark() -> aisp.Benchmark:
    return Half2Math()


if __name__ == "__main__":
    aisp.main(get_benchmark)
