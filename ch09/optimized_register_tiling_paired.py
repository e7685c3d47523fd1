"""Optimized register tiling, paired lanes: reg_tiled's 8 x 8 register tiles with a third fewer
shared-memory wavefronts.

Baseline (baseline_register_tiling.py): 32 x 32 shared-memory tiles, one output per thread: two
shared-memory loads per FMA.
Optimized: ``reg_tiled<float, true>`` (tiled_gemm.cu): reg_tiled's 128 x 128 x 8 tiles, 256
threads, 8 x 8 outputs and FMA order (bitwise the same C; 121 registers, no spills, two blocks an
SM), with a warp's threads placed as CUTLASS's SIMT GEMM places them: a 4 x 8 grid whose lane bits
are (x0, y0, x1, x2, y1), so lanes n and n^1 read the same A vector and lanes n and n^2 the same B
vector. Shared memory returns 128 bytes a cycle; a 128-bit load whose lanes pair up so is served
in 2 wavefronts instead of 4 (NVIDIA's stated rule for sm_70-75, assumed on Hopper). reg_tiled's
16 x 2 warps pair only their A loads: 12 wavefronts a k per warp, here 8; A's rows are padded to
132 floats so its transposed stores are conflict-free (4 wavefronts a slab, not 8). Per warp and
8-k slab: 72 shared wavefronts instead of 108 beside the same 569-instruction loop (SASS: 512 FFMA,
90.0%, as in reg_tiled).
Expect: not yet measured. Estimate (arithmetic, not a measurement): reg_tiled (2.916 ms) issues in
78.7% of its cycles (ncu) with the shared pipe ~60% busy, bursty after each barrier; with a third
of that traffic gone, the same instructions at 79-85% issue take 2.70-2.91 ms, 75-81% of the FFMA
rate (62.8 TFLOP/s, 2.19 ms floor); 80% needs >= 84% issue. CPU: not run (CUDA C++).
Run: python ch09/optimized_register_tiling_paired.py  |  aisp bench run -t ch09:register_tiling
"""

from __future__ import annotations

from baseline_register_tiling import NativeGemm

import aisp


class PairedLaneGemm(NativeGemm):
    entry = "reg_gemm_f32_paired"


def get_benchmark() -> aisp.Benchmark:
    return PairedLaneGemm()


if __name__ == "__main__":
    aisp.main(get_benchmark)
