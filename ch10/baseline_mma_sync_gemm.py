"""Baseline mma_sync_gemm (CUDA C++): an 8192^3 bf16 GEMM on the FP32 pipes, no tensor cores.

Baseline: C = A @ B^T (A, B 8192 x 8192 bf16, B K-major like an nn.Linear weight; fp32
accumulation; C bf16) by the best plain-CUDA GEMM of chapter 9 (gemm_simt.cu): 128x128 block
tiles, 8 k per stage converted to fp32 in shared memory, 8x8 outputs per thread (64 FFMAs per 16
shared-memory floats read), the next slice fetched into registers while this one is used.
1.1 TFLOP per call at most ~67 TFLOP/s of FFMA: the FP32 pipes, not memory, set the time.
Optimized (optimized_mma_sync_gemm.py): the same GEMM on the tensor cores with mma.sync.
Expect (measured, H200, 2026-11-23): 25.27 ms per call, 43.5 TFLOP/s: 85% of the 51 TFLOP/s fp32
ceiling (65% of the ~67 TFLOP/s FFMA peak).
Skipped without a CUDA GPU (compute capability 8.0+) and nvcc.
Run: python ch10/baseline_mma_sync_gemm.py  |  aisp bench run -t ch10:mma_sync_gemm
"""

from __future__ import annotations

from ch10_common import LadderGemm, gemm_workload

import aisp

WORKLOAD = gemm_workload(hopper=False,
                         ceiling_note="ncu: mma_sync 3.63 ms (303 TFLOP/s): L2 its busiest unit (83%, 6.45 TB/s), tensor pipe 47%, issue 32%, occupancy 25%, short_scoreboard 3.1")


class SimtGemm(LadderGemm):
    workload = WORKLOAD
    kernel = "simt"


def get_benchmark() -> aisp.Benchmark:
    return SimtGemm()


if __name__ == "__main__":
    aisp.main(get_benchmark)
