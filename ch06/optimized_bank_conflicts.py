"""Optimized bank conflicts (CUDA C++): the K tile padded to [32][33], column reads conflict-free.

Baseline (baseline_bank_conflicts.py): a [32][32] K tile read by columns: every word of a
column in the same bank, 32 passes per load.
Optimized: ``__shared__ float ks[32][33]`` (bank_conflicts.cu, ``scores<1>``): word j*33 + d is
in bank (j + d) % 32, so the 32 lanes hit 32 banks and each load is one pass. 128 bytes of padding
per tile; nothing else changes (same loads, same FMAs, same order: bitwise the same answer).
Swizzling the column index (d ^ j) does the same without the padding; CUTLASS and TMA layouts do.
Expect: measured on an H200: 0.167 ms, 2.29x [2.28, 2.30] over the baseline, 2,415 GB/s (57%
of the HBM copy ceiling). Why under 80% (SASS, sm_90; not profiled): per thread 128 FFMA, 32
LDS.128 (Q, broadcast) and 32 LDS (K column): 64 shared loads per 128 FMAs, so shared memory (one
warp load per cycle per SM) takes ~64 us for the 32,768 tiles (8 warps x 64 x 248 tiles per SM
/ ~1.98 GHz) and HBM ~96 us (402 MB); 160 us is their sum, 96% of the measured 167 us. Each block
loads, waits at __syncthreads(), then computes: overlapping the two is ch07's async_copy lesson,
not this pair's (the bank conflict). Fewer shared loads per FMA (a 4 x 4 block of S per thread,
16-byte reads, an XOR swizzle): optimized_bank_conflicts_swizzled.py.
Run: python ch06/optimized_bank_conflicts.py  |  aisp bench run -t ch06:bank_conflicts
"""

from __future__ import annotations

from baseline_bank_conflicts import ColumnReadScores

import aisp


class PaddedScores(ColumnReadScores):
    layout = 1


def get_benchmark() -> aisp.Benchmark:
    return PaddedScores()


if __name__ == "__main__":
    aisp.main(get_benchmark)
