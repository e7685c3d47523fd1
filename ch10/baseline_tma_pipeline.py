"""Baseline tma_pipeline (CUDA C++): the wgmma GEMM fed by cp.async copies from every thread.

Baseline: rung 3 of the ladder, the optimized side of wgmma_gemm (gemm_wgmma.cu): 2 warpgroups per
128x256 tile issue m64n256k16 wgmmas from a 4-stage ring of 48 KB K slices that all 256 threads
fill with cp.async (12 copies of 16 bytes each per slice, addresses swizzled by hand), then wait
for their copies, fence them into the async proxy and meet at a block barrier, every slice.
Optimized (optimized_tma_pipeline.py): one thread asks the Tensor Memory Accelerator for each
slice through tensor maps; completion is counted on an mbarrier per stage.
Expect (measured, H200, 2026-11-23): 1.69 ms per call, 652 TFLOP/s (83% of 783).
Hopper only (wgmma, sm_90a).
Run: python ch10/baseline_tma_pipeline.py  |  aisp bench run -t ch10:tma_pipeline
"""

from __future__ import annotations

from ch10_common import LadderGemm, gemm_workload

import aisp

WORKLOAD = gemm_workload(hopper=True)


class CpAsyncWgmmaGemm(LadderGemm):
    workload = WORKLOAD
    kernel = "wgmma"


def get_benchmark() -> aisp.Benchmark:
    return CpAsyncWgmmaGemm()


if __name__ == "__main__":
    aisp.main(get_benchmark)
