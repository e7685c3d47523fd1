"""Optimized tensor-parallel MLP (2 GPUs), overlapped on a communicator capped at 4 SMs.

Baseline (baseline_tensor_parallel_multigpu.py): all-gather, GEMMs, reduce-scatter, in turn.
Optimized: the chunked overlap of optimized_tensor_parallel_multigpu.py, its collectives on a second
NCCL communicator created with ``max_ctas=4`` (``ProcessGroupNCCL.Options().config``). With NCCL's
default channel count its kernels hold some 16-32 SMs while they overlap the GEMMs, which then run
on fewer SMs; four SMs still move a chunk (16 MB each way) faster than its GEMMs take.
Expect (measured, 2 x H200, 2026-11-26): SLOWER, and slower than the uncapped variant: 2.124 ->
2.604 ms, 0.81x [0.76, 0.85] (uncapped 0.92x in the same run; estimated above 0.93x). Capping NCCL's
SMs does not buy back the chunked GEMMs' loss.
Run: aisp bench run -t ch04:tensor_parallel_multigpu
"""

from __future__ import annotations

from optimized_tensor_parallel_multigpu import OverlappedTensorParallel

import aisp


class LeanOverlap(OverlappedTensorParallel):
    comm_ctas = 4


def get_benchmark() -> aisp.Benchmark:
    return LeanOverlap()


if __name__ == "__main__":
    aisp.main(get_benchmark)
