"""Optimized register tiling, warp-tiled: 8 x 16 outputs per thread, one barrier per double-buffered k-slab.

Baseline (baseline_register_tiling.py): 32 x 32 shared-memory tiles, one output per thread: two
shared-memory loads per FMA.
Optimized: ``warp_tiled`` (tiled_gemm.cu): the 128 x 128 tile of optimized_register_tiling.py on
128 threads, each holding 8 x 16 outputs in registers. reg_tiled is issue-bound (Nsight Compute: SM
78.7%, top stall not_selected), and 10% of its main loop's instructions are not FFMAs: per k it
loads 16 operands for 64 FFMAs and, per 8 k, stages the next slab through registers (2 LDG, 5 STS)
between two barriers. Here per k 24 operands (six 128-bit loads, the 8 of A fetched 4 k at a time)
feed 128 FFMAs; cp.async copies the next 8-k slab straight into the idle one of two shared buffers,
so one barrier per slab; with a 64 x 64 sub-tile per warp a 128-bit shared load reads 8 padded rows
of A or 64 contiguous bytes of B (conflict-free by construction, not yet profiled). SASS (nvcc
13.0, sm_90): 255 registers, no spills; main loop 1,024 FFMA of 1,111 instructions (92.2%;
reg_tiled 512 of 569, 90.0%), 1 barrier per 1,024 FFMAs (reg_tiled 2 per 512). The cost: 8 warps
per SM (reg_tiled 16), two blocks of 4. Same k order, same fmaf: the same bits as reg_tiled.
Expect: not yet measured (no GPU run of this kernel so far).
Run: python ch09/optimized_register_tiling_warptile.py  |  aisp bench run -t ch09:register_tiling
"""

from __future__ import annotations

from baseline_register_tiling import NativeGemm

import aisp


class WarpTiledGemm(NativeGemm):
    entry = "warp_gemm_f32"


def get_benchmark() -> aisp.Benchmark:
    return WarpTiledGemm()


if __name__ == "__main__":
    aisp.main(get_benchmark)
