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
Expect: not yet measured. Estimate (arithmetic, not a measurement): its loop is 88.6% FFMA (512
of 578 SASS instructions, 127 registers, no spills; regblock 90.0%), so the gain is the exposed
load latency: toward the 74% of the FFMA rate that ch09's prefetching reg_tiled reaches, 1.78 ms
-> ~1.5 ms (~46 TFLOP/s).
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
