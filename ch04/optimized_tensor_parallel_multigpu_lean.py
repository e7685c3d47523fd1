"""Optimized tensor-parallel MLP (2 GPUs), overlapped on a 16-SM high-priority communicator, the
GEMMs leaving those 16 SMs free.

Baseline (baseline_tensor_parallel_multigpu.py): all-gather, GEMMs, reduce-scatter, in turn.
Optimized: the chunked overlap of optimized_tensor_parallel_multigpu.py, with the two settings that
make the overlap real: a large cuBLAS GEMM launches a CTA per SM and keeps every SM until it ends,
so a collective launched beside it waits for SMs. Here the GEMMs run under
``kits.multirank.gemm_carveout(16)`` (they target 116 of 132 SMs) and the collectives on a second
NCCL communicator (``lean_group(16)``: ``max_ctas=16``, a high-priority stream), so chunk c+1's
all-gather and chunk c-1's reduce-scatter run while chunk c's GEMMs do.
Expect (measured, 2 x H200, 2026-11-27): SLOWER: 1.898 -> 2.159 ms, 0.88x (estimated 1.0-1.15x); the
4-CTA version without the carveout measured 0.81-0.83x. The carveout did not buy the overlap back.
Run: aisp bench run -t ch04:tensor_parallel_multigpu
"""

from __future__ import annotations

import torch
from optimized_tensor_parallel_multigpu import OverlappedTensorParallel

import aisp
from aisp.kits.multirank import gemm_carveout


class LeanOverlap(OverlappedTensorParallel):
    comm_ctas = 16

    def run(self) -> torch.Tensor:
        with gemm_carveout(16):
            return super().run()


def get_benchmark() -> aisp.Benchmark:
    return LeanOverlap()


if __name__ == "__main__":
    aisp.main(get_benchmark)
