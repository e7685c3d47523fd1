"""Baseline wgmma_gemm (CUDA C++): the 8192^3 bf16 GEMM with warp-level mma.sync and a cp.async ring.

Baseline: rung 2 of the ladder, the optimized side of mma_sync_gemm (gemm_mma_sync.cu): 128x128
tiles, 8 warps each issuing mma.sync.m16n8k16 (HMMA) on operands read with ldmatrix, a 4-stage
cp.async ring. Each warp spends issue slots on ldmatrix and HMMA, and its operands occupy registers.
Optimized (optimized_wgmma_gemm.py): Hopper's warpgroup MMA (wgmma.mma_async) reading both
operands from 128B-swizzled shared memory through descriptors, 128x256 tiles.
Expect (measured, H200, 2026-11-23): 3.70 ms per call, 297 TFLOP/s (38% of 783): mma.sync issue and
register-file operands bound it.
Hopper only (the pair's optimized side is sm_90a).
Run: python ch10/baseline_wgmma_gemm.py  |  aisp bench run -t ch10:wgmma_gemm
"""

from __future__ import annotations

from ch10_common import LadderGemm, gemm_workload

import aisp

WORKLOAD = gemm_workload(hopper=True)


class MmaSyncCpAsyncGemm(LadderGemm):
    workload = WORKLOAD
    kernel = "mma_sync"


def get_benchmark() -> aisp.Benchmark:
    return MmaSyncCpAsyncGemm()


if __name__ == "__main__":
    aisp.main(get_benchmark)
