"""Optimized coalescing, float4 (CUDA C++): coalesced, and 16 bytes per thread per access.

Baseline (baseline_coalescing.py): a warp's 32 threads touch 32 rows: 32 sectors per access,
4 useful bytes in each 32 moved.
Optimized: thread t handles elements 4t..4t+3 with one 128-bit load and one 128-bit store
(``scale_float4``): still coalesced (a warp covers 512 contiguous bytes), with 4x the bytes in
flight per thread, which is what a GPU with ~4 TB/s of HBM needs to hide DRAM latency.
Expect: ~8x on an H100/H200, >= 80% of the HBM copy bandwidth.
Run: python ch01/optimized_coalescing_float4.py  |  aisp bench run -t ch01:coalescing
"""

from __future__ import annotations

from baseline_coalescing import StridedScale

import aisp


class Float4Scale(StridedScale):
    mode = 2


def get_benchmark() -> aisp.Benchmark:
    return Float4Scale()


if __name__ == "__main__":
    aisp.main(get_benchmark)
