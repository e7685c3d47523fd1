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
Expect: not yet measured. Estimate (arithmetic, not a measurement): issue-bound, the loop caps the
HFMA2 rate at 95.2% of the 123.7 TFLOP/s fp16 SIMT peak (117.7, 0.146 ms); at 80-90% of the peak
(tail_effect's like-built FFMA loop reaches 91% of its rate) 0.155-0.175 ms, vs 0.290 ms for
``poly_half2`` (1.7-1.9x) and 0.328 ms for the baseline (1.9-2.1x). 17.2 GFLOP, 256 MiB per call.
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
