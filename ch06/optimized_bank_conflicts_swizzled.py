"""Optimized bank conflicts, swizzled variant (CUDA C++): a 4 x 4 block of S per thread from 16-byte
shared reads, conflict-free by an XOR swizzle where no padding can be.

Baseline (baseline_bank_conflicts.py): a [32][32] K tile read by columns, 32 passes per load.
optimized_bank_conflicts.py pads the tile to [32][33]: one pass per load, but still 2 shared loads
per 8 FMAs (a Q broadcast and a K column word per step): the L1/shared pipe 94% busy (ncu).
Optimized: ``scores_swizzled`` (bank_conflicts.cu, 64 threads per tile, 2 tiles per 128-thread
block): thread (ty, tx) computes S[4ty..4ty+3][4tx..4tx+3]; per 4 steps of d it reads 4 Q rows and
4 K rows as 16-byte chunks (LDS.128) for 64 FMAs: 8 shared loads per 64 FMAs instead of 32. A warp
reads K rows 4tx+b for tx = 0..7, the same chunk c: rows 4 apart. Padding that keeps 16-byte
alignment shifts a row by a multiple of 4 banks, so rows 4 apart sit 0 or 16 banks apart: 4 passes
at best. The XOR swizzle (chunk c of row r stored at chunk c ^ (r / 4 % 8)) puts the 8 rows' chunks
on all 32 banks once: one pass (tests/test_ch06_pairs.py counts the passes of each layout).
Global memory moves as float4 (8 LDG.128 and 4 STG.128 per thread). Same FMAs in the same order
per element: bitwise the same answer. ptxas: 48 registers, no spill, 10 blocks (20 tiles) per SM.
Expect (measured, H200, 2026-11-29): 0.3700 -> 0.09683 and 0.09645 ms (two runs), 3.83x [3.50, 4.18];
98-99% of HBM copy (the padded kernel 0.155 ms, 61%); the estimate before the run was 105-120 us.
Run: python ch06/optimized_bank_conflicts_swizzled.py  |  aisp bench run -t ch06:bank_conflicts
"""

from __future__ import annotations

from baseline_bank_conflicts import ColumnReadScores

import aisp


class SwizzledBlockScores(ColumnReadScores):
    layout = 2


def get_benchmark() -> aisp.Benchmark:
    return SwizzledBlockScores()


if __name__ == "__main__":
    aisp.main(get_benchmark)
