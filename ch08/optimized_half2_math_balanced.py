"""Optimized half2 math, 12 chains a thread, both fp16 pipes kept busy in turn (CUDA C++).

Baseline (baseline_half2_math.py): fp16 data widened to fp32, two chains of 128 FFMAs per thread.
Optimized: the packed ``__hfma2`` Horner chain (the lesson), 4 chains a thread in
optimized_half2_math_ilp.py (measured 0.1829 / 0.1851 ms on an H200: 75-76% of the 123.7 TFLOP/s
fp16 SIMT peak; Nsight Compute: top stalls math_pipe_throttle 4.41 and not_selected 4.38). Its sm_90
SASS says why: with the coefficients as immediates ptxas gives each chain one of the two fp16 pipes
(``HFMA2``: FMA pipe, ``HFMA2.MMA``: MMA pipe) and runs the two MMA chains first: a stretch of ~120
``HFMA2.MMA`` alone, then mostly ``HFMA2``, so warps queue on one pipe while the other idles.
``poly_half2_balanced`` (half2_poly.cu) reads the same fp16 coefficient pairs from a ``__constant__``
table (``LDC.64``, two pairs a load, shared by all chains): with register operands ptxas alternates
``HFMA2.MMA`` / ``HFMA2`` through the whole loop, as the peak probe's loop does. 12 chains a thread (3
16-byte vectors a step; 32 registers: 8 blocks of 256 an SM, a persistent grid) pay for the loads: 1,536 HFMA2 of the loop's 1,652 instructions (93.0%; 64 LDC.64,
24 clamps). Same clamp and HFMA2s per element in the same order, same coefficients: poly_half2's bits.
Expect: not yet measured. Estimate (arithmetic, not a measurement): an issue model of one SM
sub-partition (one issue a cycle, each fp16 pipe one warp instruction every 2 cycles, ptxas's stall
counts) gives `_ilp`'s loop 0.78 and this loop 0.93 HFMA2 a cycle (the probe's 0.94); scaled by
`_ilp`'s measured 76% of peak: ~0.153 ms (0.150-0.170 ms, 82-93% of the ceiling; 80% is 0.1736 ms).
17.2 GFLOP, 256 MiB per call.
Run: python ch08/optimized_half2_math_balanced.py  |  aisp bench run -t ch08:half2_math
"""

from __future__ import annotations

from baseline_half2_math import Fp32MathOnHalf

import aisp


class Half2MathBalanced(Fp32MathOnHalf):
    mode = 3
    """half2_poly.cu's poly_half2_balanced: 12 packed chains a thread, coefficients from a __constant__ table."""


def get_benchmark() -> aisp.Benchmark:
    return Half2MathBalanced()


if __name__ == "__main__":
    aisp.main(get_benchmark)
