"""Optimized tiled matmul, cp.async-fed register blocking with paired lanes: a third fewer shared-memory
wavefronts than the async variant, at the same instructions.

Baseline (baseline_tiled_matmul.py): one output per thread, two global loads per FMA.
Optimized: optimized_tiled_matmul_async.py's kernel (cp.async two-stage 128x8 slices, 8x8 outputs a
thread, the same FMAs in the same order: bit for bit its result) with each warp's 32 threads placed
on a 4 x 8 patch of the 16 x 16 thread grid instead of a 2 x 16 strip (tiled_matmul.cu,
``matmul_async<true>``), as CUTLASS places SIMT GEMM threads: lanes n and n^1 read the same A float4,
lanes n and n^2 the same B float4. Shared memory returns 128 bytes a cycle; a 128-bit load whose
lanes pair so packs two lanes a cycle: 2 wavefronts, not 4 (NVIDIA's stated rule for sm_70-75,
assumed on Hopper). The async strip pairs only A (16 lanes on one address); its B loads take 4.
Per warp and 8-k slice: 96 -> 64 load wavefronts (+8 for the cp.async stores either way), 104 -> 72.
SASS (nvcc 13.0, sm_90, a CPU test): the loop is async's instruction for instruction (578, 512 FFMA,
88.6%), 127 registers, no spills; only the lane -> tile arithmetic before the loop differs.
Expect (measured, H200, 2026-11-29; two runs of 20 samples): 1.516 and 1.518 ms median (min 1.511,
1.512) against async's 1.543 and 1.547: 1.8% faster, 72% of the FFMA rate (the estimate was 1.44-1.48
ms, or a tie if shared bandwidth was not the bound): the fewer wavefronts moved little, so the shared
pipe was not the main limit; issue slots shared by FFMA and LDS remain (the ceiling note's profile).
Run: python ch07/optimized_tiled_matmul_paired.py  |  aisp bench run -t ch07:tiled_matmul
"""

from __future__ import annotations

from baseline_tiled_matmul import NaiveMatmul

import aisp


class PairedLaneMatmul(NaiveMatmul):
    mode = 4


def get_benchmark() -> aisp.Benchmark:
    return PairedLaneMatmul()


if __name__ == "__main__":
    aisp.main(get_benchmark)
