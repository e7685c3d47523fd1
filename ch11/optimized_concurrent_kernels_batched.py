"""Optimized concurrent kernels, batched: the 16 small kernels' work as one launch of 128 blocks.

Baseline (baseline_concurrent_kernels.py): 16 independent 8-block kernels on one stream: 16 in a
row, 8 of 132 SMs busy.
Optimized: the 16 kernels are the same code (``fma_chain``) on the 16 rows of one contiguous
(16, 2048) tensor, so one launch over the whole tensor does all of them: 16 x 8 = 128 blocks of 256
threads, one block an SM, every element's 20,000-FMA chain side by side in one round. The 8-stream
variant (optimized_concurrent_kernels.py) is held to 8 kernels at once (one per stream: 2 rounds,
0.1065 ms measured on an H200, 38% of the ceiling) and pays a fork and join of 8 streams and a
launch from each queue. Here no block waits for another: the critical path is one thread's chain,
the pair's declared ceiling (20,000 dependent FMAs at ~2.05 ns, 40.9 us). Each element's chain is
the baseline's, in the same order, so the output is bit for bit the baseline's. The lesson: streams
run side by side kernels that cannot be batched (different code, sizes, or times of arrival);
independent calls of one kernel on slices of one tensor are one launch.
Expect: measured (H200, 2026-11-29, two runs of 20 samples): 0.0512 / 0.0509 ms against the
8-stream variant's 0.1068 / 0.1074 in the same runs (2.1x), 80% of the 40.9 us ceiling (estimated
48-50 us, 82-85%), 14.5-14.9x over the baseline.
Run: python ch11/optimized_concurrent_kernels_batched.py  |  aisp bench run -t ch11:concurrent_kernels
"""

from __future__ import annotations

import torch
from baseline_concurrent_kernels import OneStreamKernels
from ch11_common import small_kernel

import aisp


class BatchedKernels(OneStreamKernels):
    """out = fma_chain(x) over all 16 rows at once: one kernel of kernels x blocks blocks."""

    def setup(self) -> None:
        super().setup()
        # One launch reads x and writes out as flat arrays: row k's elements are k * 2048 onwards.
        if not (self.x.is_contiguous() and self.out.is_contiguous()):
            raise RuntimeError("the batched launch needs x and out contiguous")

    def run(self) -> torch.Tensor:
        small_kernel(self.lib, self.x, self.out, self.workload.iters, torch.cuda.current_stream(self.device))
        return self.out


def get_benchmark() -> aisp.Benchmark:
    return BatchedKernels()


if __name__ == "__main__":
    aisp.main(get_benchmark)
