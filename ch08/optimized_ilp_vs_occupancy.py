"""Optimized ILP vs occupancy (CUDA C++): 4 independent elements per thread at half the occupancy.

Baseline (baseline_ilp_vs_occupancy.py): one element per thread, 100% occupancy, 8 bytes of loads
in flight per thread.
Optimized: ``saxpy_ilp<4>`` (saxpy_ilp.cu) on a grid of SMs x 4 blocks of 256 threads (50%
occupancy), striding over the array: each step loads 4 elements of x and 4 of y (element k at
offset k x 256, so each load instruction is still one coalesced 128-byte line per warp) before
computing any: 32 bytes in flight per thread, 2x the baseline's per SM with half the threads.
Expect: 1.18x [1.17, 1.20] measured on an H200 (0.248 -> 0.209 ms), 3.84 TB/s: 92% of HBM copy bandwidth.
Run: python ch08/optimized_ilp_vs_occupancy.py  |  aisp bench run -t ch08:ilp_vs_occupancy
"""

from __future__ import annotations

from baseline_ilp_vs_occupancy import OneElementPerThread

import aisp


class FourElementsPerThread(OneElementPerThread):
    ilp = 4
    blocks_per_sm = 4


def get_benchmark() -> aisp.Benchmark:
    return FourElementsPerThread()


if __name__ == "__main__":
    aisp.main(get_benchmark)
