"""Optimized tiled matmul, shared-memory tiles (CUDA C++): 32x32 tiles of A and B staged per block.

Baseline (baseline_tiled_matmul.py): one output per thread, two global loads per FMA.
Optimized: 32x32 threads per block; each k step of 32 loads one element of A and one of B per
thread into shared memory, syncs, and does 32 FMAs from the tiles (tiled_matmul.cu,
``matmul_smem``): 32x less global traffic per FMA. Each FMA still reads two shared-memory words
(one a broadcast), so shared-memory load issue, not the FMA units, bounds it: the step to
register blocking (optimized_tiled_matmul.py) removes that.
Expect (measured, H200): 7.35 ms, 1.33x [1.33, 1.33] over the baseline, 9.3 TFLOP/s (14% of the
FP32 FMA peak): two shared loads per FMA.
Run: python ch07/optimized_tiled_matmul_smem.py  |  aisp bench run -t ch07:tiled_matmul
"""

from __future__ import annotations

from baseline_tiled_matmul import NaiveMatmul

import aisp


class SmemMatmul(NaiveMatmul):
    mode = 1


def get_benchmark() -> aisp.Benchmark:
    return SmemMatmul()


if __name__ == "__main__":
    aisp.main(get_benchmark)
