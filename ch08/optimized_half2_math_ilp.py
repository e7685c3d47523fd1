"""Optimized half2 math, 4 chains a thread (CUDA C++): packed __half2 math, then ILP on top of it.

Baseline (baseline_half2_math.py): fp16 data widened to fp32, two chains of 128 FFMAs per thread.
Optimized: the lesson is unchanged, the packed ``__hfma2`` Horner chain (HFMA2, two fp16 FMAs an
instruction); ILP is a second technique on top (the one ilp_vs_occupancy teaches). The measured
packed kernel (optimized_half2_math.py, ``poly_half2``) runs one dependent chain of 128 HFMA2 a
thread: ~1,050 stall cycles per 128 HFMA2 in its sm_90 SASS (~8 a step), and Nsight Compute on an
H200 counts issue 53%, the FMA pipe 45.8% busy, top stall ``wait``: latency, not the pipes.
``poly_half2_ilp`` (half2_poly.cu) gives each thread 4 __half2 from one 16-byte load (a uint4 of
packed halves) and runs their 4 chains side by side: its loop holds 512 HFMA2 (256 ``HFMA2``, 256
``HFMA2.MMA``: both fp16 pipes) of 538 instructions (95.2%) in about the same stall cycles as one
chain (1,067), so a warp offers ~4x the independent HFMA2s. A persistent grid of SMs x 8 blocks of
256 (20 registers: a full SM, whole waves) strides over the vectors, each next one loaded before
this one's 512 HFMA2; the ~0.1% left under one round go one __half2 a thread. Same clamp and
HFMA2s in the same order per element as ``poly_half2``: the same bits (a GPU test checks it).
Expect: measured on an H200 (2026-11-29, two runs): 0.1829 / 0.1851 ms, 1.79x / 1.76x the baseline
(0.3266 / 0.3277 ms; poly_half2 0.2893 / 0.2899), 93.9 / 92.8 TFLOP/s: 76% / 75% of the 123.7 TFLOP/s
fp16 SIMT ceiling. Nsight Compute: 182.2 us, SM 77.3%, MMA pipe 73.2%, top stall math_pipe_throttle
4.41: the pipes in turn, not both at once. A variant that made ptxas alternate them (coefficients
from a __constant__ table, 12 chains) measured slower, 0.2019 / 0.2022 ms against this file's 0.1831 /
0.1829 in the same runs, and was removed (README, section 7). 17.2 GFLOP, 256 MiB.
Run: python ch08/optimized_half2_math_ilp.py  |  aisp bench run -t ch08:half2_math
"""

from __future__ import annotations

from baseline_half2_math import Fp32MathOnHalf

import aisp


class Half2MathIlp(Fp32MathOnHalf):
    mode = 2
    """half2_poly.cu's poly_half2_ilp: 4 packed chains a thread, a persistent grid."""


def get_benchmark() -> aisp.Benchmark:
    return Half2MathIlp()


if __name__ == "__main__":
    aisp.main(get_benchmark)
