"""Optimized mma_sync_gemm (CUDA C++): the same GEMM on the tensor cores through warp-level mma.sync.

Baseline (baseline_mma_sync_gemm.py): FP32 FFMA register-tiled GEMM, ~67 TFLOP/s at the very best.
Optimized: gemm_mma_sync.cu: 128x128 block tiles, 8 warps of 64x32, each as 4 x 4 fragments of
``mma.sync.m16n8k16`` (bf16 in, fp32 accumulate; HMMA in SASS): one instruction does 2,048
multiply-adds that took 2,048 FFMAs. Operands reach shared memory through a 4-stage cp.async ring
(LDGSTS: three K slices in flight while one is used) and the registers through ldmatrix.x4 from
rows padded to 80 bytes (no bank conflicts). Same inputs, same fp32 accumulation, bf16 out.
What still limits it on Hopper: every warp issues its own mma and ldmatrix instructions and the
operands pass through registers; the wgmma pair (next rung) removes both.
Expect (measured, H200, 2026-11-23): 25.27 → 3.66 ms, 300 TFLOP/s (38% of the 783 TFLOP/s bf16 peak;
40% of cuBLAS in gemm_ladder.py), 6.90x [6.86, 6.93], inside the estimated 6-12x.
Run: python ch10/optimized_mma_sync_gemm.py  |  aisp bench run -t ch10:mma_sync_gemm
"""

from __future__ import annotations

from baseline_mma_sync_gemm import SimtGemm

import aisp


class MmaSyncGemm(SimtGemm):
    kernel = "mma_sync"


def get_benchmark() -> aisp.Benchmark:
    return MmaSyncGemm()


if __name__ == "__main__":
    aisp.main(get_benchmark)
