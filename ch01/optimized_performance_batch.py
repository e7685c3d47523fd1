"""Optimized performance basics (batch): the naive loop with one 256-row batch per SGD step.

Baseline (baseline_performance.py): each SGD step accumulates 8 micro-batches of 32 rows, so
it pays 8x the copies, allocations and ~20 kernel launches, each GEMM too small to fill the GPU.
Optimized: one batch of 256 rows per step: the same gradient (the mean over the same 256
samples), 8x fewer launches and copies, GEMMs 8x larger.
Expect: ~6x on an H200 (8x fewer host-bound micro-steps), about 2x on a CPU.
Run: python ch01/optimized_performance_batch.py  |  aisp bench run -t ch01:performance
"""

from __future__ import annotations

from baseline_performance import WORKLOAD, TrainingLoop

import aisp


class BatchLoop(TrainingLoop):
    micro = WORKLOAD.step_samples


def get_benchmark() -> aisp.Benchmark:
    return BatchLoop()


if __name__ == "__main__":
    aisp.main(get_benchmark)
