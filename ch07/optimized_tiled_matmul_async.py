"""Optimized tiled matmul, register blocking fed by cp.async (CUDA C++): copies overlap the math.

Baseline (baseline_tiled_matmul.py): one output per thread, two global loads per FMA.
Optimized: optimized_tiled_matmul.py's 128x128 block tiles and 8x8 outputs per thread (the same
FMAs in the same order: bit for bit its result), with the memory movement of the slices fixed
(tiled_matmul.cu, ``matmul_async``). ``matmul_regblock`` loads each 8-deep slice of A and B only
when it needs it, stores it to shared memory and syncs: every slice waits a global-memory latency
with only two blocks an SM (119 registers) to hide it, so its FMA pipe sits at 59%. Here
cp.async copies slice s+1 straight into the second of two shared-memory stages while slice s is
multiplied: no staging registers, no wait on the load, one barrier a slice instead of two. The
copies stay coalesced (each 4-byte copy of a warp reads four whole 32-byte rows of A; B goes in
16-byte copies) and transpose A on the way in, into rows padded to 132 floats so a warp's 32
writes fall in 32 distinct banks (unpadded: 8-way conflicts), the transpose lesson's padding.
Expect: measured, H200, 2026-11-29 (two runs): 1.5457 and 1.5413 ms, 44.5 TFLOP/s, 70.8% and 71.0%
of the measured 62.8 TFLOP/s FFMA ceiling, 6.33x [6.31, 6.36] and 6.34x [6.30, 6.37] over the baseline;
matmul_regblock 1.7664 / 1.7587 ms (62%) in the same runs. Nsight Compute (H200, same day): 1,542.0 us,
SOL SM 75.9% (regblock 65.6%), occupancy 24.1% (2 blocks of 256 an SM); long_scoreboard (regblock's
1.05) is gone, the top stall is not_selected 2.19: the FFMAs share issue slots with LDS and
addressing. Estimated before: ~1.5 ms (~46 TFLOP/s), the loop 88.6% FFMA (512 of 578 SASS
instructions, 127 registers, no spills; regblock 90.0%), toward ch09's prefetching reg_tiled's 74%.
Run: python ch07/optimized_tiled_matmul_async.py  |  aisp bench run -t ch07:tiled_matmul
"""

from __future__ import annotations

from baseline_tiled_matmul import NaiveMatmul

import aisp


class AsyncCopyMatmul(NaiveMatmul):
    mode = 3


def get_benchmark() -> aisp.Benchmark:
    return AsyncCopyMatmul()


if __name__ == "__main__":
    aisp.main(get_benchmark)
