"""Optimized batch size: the same 8,192 samples through the same MLP, 256 rows per step.

Baseline (baseline_batch_size.py): 32 rows per step, 256 steps, 768 small launches.
Optimized: 256 rows per step, 32 steps, 96 launches; each GEMM is 8x larger, so the GPU's SMs
are busy instead of waiting on the host. Same FLOPs and bytes, same outputs.
Expect: about 5-8x on an H100/H200, 1.5-3x on a CPU.
Run: python ch01/optimized_batch_size.py  |  aisp bench run -t ch01:batch_size
"""

from __future__ import annotations

from baseline_batch_size import WORKLOAD, BatchedMLP

import aisp


class LargeBatchMLP(BatchedMLP):
    rows = WORKLOAD.optimized_rows


def get_benchmark() -> aisp.Benchmark:
    return LargeBatchMLP()


if __name__ == "__main__":
    aisp.main(get_benchmark)
