"""Baseline warp_specialization (CUDA C++): TMA + wgmma GEMM in which every warpgroup loads and computes.

Baseline: rung 4 of the ladder, the optimized side of tma_pipeline (gemm_tma.cu): 2 warpgroups per
128x256 tile; thread 0 issues the TMA loads between its own wgmmas, and a block barrier every K
slice makes sure both warpgroups are done with a stage before it is refilled, so each slice every
warp waits for the slowest one, and the load for slice k+3 is issued only after slice k-1's wgmmas
have drained everywhere.
Optimized (optimized_warp_specialization.py): a producer warpgroup (one thread issuing TMA) and two
consumer warpgroups, handing stages over through full/empty mbarriers; setmaxnreg moves registers
from the producer to the consumers.
Expect (measured, H200, 2026-11-23): 1.49 ms per call, 736 TFLOP/s (94% of 783, 98% of cuBLAS in
gemm_ladder.py).
Hopper only (wgmma, TMA, sm_90a).
Run: python ch10/baseline_warp_specialization.py  |  aisp bench run -t ch10:warp_specialization
"""

from __future__ import annotations

from ch10_common import LadderGemm, gemm_workload

import aisp

WORKLOAD = gemm_workload(hopper=True)


class TmaSharedRoleGemm(LadderGemm):
    workload = WORKLOAD
    kernel = "tma"


def get_benchmark() -> aisp.Benchmark:
    return TmaSharedRoleGemm()


if __name__ == "__main__":
    aisp.main(get_benchmark)
