"""Optimized batch size, whole: all 8,192 samples through the MLP in one step.

Baseline (baseline_batch_size.py): 32 rows per step, 256 steps, 768 small launches.
Optimized (optimized_batch_size.py): 256 rows per step, 32 steps; each GEMM still a 64x64-tile
FFMA kernel that leaves SMs idle (profiled: 0.88 ms of kernels in a call that takes ~1.8 ms).
This variant: the lesson's step taken to its end, one step of every row: x @ w1 (8,192 x 512 @
512 x 1,024) with the ReLU in the GEMM's epilogue, then @ w2 into the output; two launches, GEMMs
large enough to fill the GPU's 132 SMs. The same samples and weights; each output row is the same dot products (the GEMM
kernel may differ, so its sums' order too: fp32 tolerance).
Expect: measured, H200, 2026-12-01 (two runs of 20 samples, one host): 0.3907 / 0.3900 ms, 85.9% / 86.1%
of the 0.336 ms fp32 ceiling, against the 256-row variant's 1.62 / 1.61 ms (estimated 0.36-0.42 ms,
80-93%). The first form (ReLU as its own pass, three launches) read 0.4033 ms (83.2%) on one host and
0.4333 (77.4%) on a slower one (its host-bound variants 1.7x slower there); the call is timed from idle,
so the host's first dispatch is in it. A sweep on one H200 put the epilogue ReLU 11-14 us ahead.
Run: python ch01/optimized_batch_size_whole.py  |  aisp bench run -t ch01:batch_size
"""

from __future__ import annotations

import torch
from baseline_batch_size import BatchedMLP

import aisp


class WholeBatchMLP(BatchedMLP):
    def setup(self) -> None:
        super().setup()
        self.zero_bias = torch.zeros(self.workload.hidden, device=self.device)

    def run(self) -> torch.Tensor:
        # relu(0 + x @ w1) in one call: torch's addmm with a ReLU epilogue (what Inductor emits for
        # Linear + ReLU; cuBLASLt's RELU epilogue on CUDA), so no pass over the 32 MiB hidden tile.
        hidden = torch._addmm_activation(self.zero_bias, self.x, self.w1)
        return torch.mm(hidden, self.w2, out=self.out)


def get_benchmark() -> aisp.Benchmark:
    return WholeBatchMLP()


if __name__ == "__main__":
    aisp.main(get_benchmark)
