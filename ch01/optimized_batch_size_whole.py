"""Optimized batch size, whole: all 8,192 samples through the MLP in one step.

Baseline (baseline_batch_size.py): 32 rows per step, 256 steps, 768 small launches.
Optimized (optimized_batch_size.py): 256 rows per step, 32 steps; each GEMM still a 64x64-tile
FFMA kernel that leaves SMs idle (profiled: 0.88 ms of kernels in a call that takes ~1.8 ms).
This variant: the lesson's step taken to its end, one step of every row: x @ w1 (8,192 x 512 @
512 x 1,024), ReLU in place, @ w2 into the output; three launches, GEMMs large enough to fill the
GPU's 132 SMs. The same samples and weights; each output row is the same dot products (the GEMM
kernel may differ, so its sums' order too: fp32 tolerance).
Expect: measured, H200, 2026-12-01 (20 samples): 0.4033 ms, 83.2% of the 0.336 ms fp32 ceiling
(42.7 TFLOP/s), against the 256-row variant's 1.9356 and the baseline's 13.35 ms in the same run
(estimated 0.36-0.42 ms, 80-93%).
Run: python ch01/optimized_batch_size_whole.py  |  aisp bench run -t ch01:batch_size
"""

from __future__ import annotations

import torch
from baseline_batch_size import BatchedMLP

import aisp


class WholeBatchMLP(BatchedMLP):
    rows = BatchedMLP.workload.samples

    def run(self) -> torch.Tensor:
        hidden = torch.relu_(self.x @ self.w1)
        return torch.mm(hidden, self.w2, out=self.out)


def get_benchmark() -> aisp.Benchmark:
    return WholeBatchMLP()


if __name__ == "__main__":
    aisp.main(get_benchmark)
