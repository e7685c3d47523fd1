"""Optimized concurrent kernels, batched, with the FMA loop at its floor: one launch of 128 blocks
(optimized_concurrent_kernels_batched.py) running fma_dependent's loop shape.

Baseline (baseline_concurrent_kernels.py): 16 independent 8-block kernels on one stream: 16 in a
row, 8 of 132 SMs busy.
Optimized: the batched variant's one launch over the whole (16, 2048) tensor (128 blocks of 256, one
an SM), as ``small_kernel_unrolled`` (ch11_kernels.cu): each element's 20,000 FMAs in the same order
(bit for bit the baseline's output), in a loop of 64 FMAs a trip whose sm_90 SASS holds 515 stall
cycles per 128 FMAs (4.02 an FMA, the floor's loop) instead of the plain loop's 67 per 16 (4.19: the
back edge every 16 FMAs). The pair's ceiling is one thread's 20,000 dependent FMAs at fma_dependent's
2.05 ns (4.05 cycles), measured with that loop: this runs the chain the ceiling prices.
Where the batched variant's 50.9-51.2 us went (arithmetic from the measured figures): 42.3 us of FMAs
at the static 4.19 cycles (1.98 GHz, the clock its runs held); the rest, ~8.7 us, is the start event to
the first block, the load of x, the store and the end event (the baseline's kernels in a row take 47.5
us each) and FFMAs issuing later than their static schedule with two warps on each scheduler.
Expect: measured (H200 of a 2 x H200 host, 2026-11-30, two runs of 20 samples): 0.0471 / 0.0465 ms
against the batched variant's 0.0635 / 0.0509 and the baseline's 0.7607 / 0.7613 in the same runs:
15.15x [14.34, 16.01] / 16.35x [14.37, 18.60], 87.0% / 87.9% of the ceiling (20,000 x 2.05 ns), the
pair's best. Estimated 49.2-49.6 us, 82.5-83%; measured 46.5-47.1 us, 87-88%: beside the batched
variant's 50.9 us (second run) it saved 4.4 us, more than the static 1.7 us counted (not profiled).
Run: python ch11/optimized_concurrent_kernels_batched_unrolled.py  |  aisp bench run -t ch11:concurrent_kernels
"""

from __future__ import annotations

import torch
from ch11_common import THREADS, small_kernel_unrolled
from optimized_concurrent_kernels_batched import BatchedKernels

import aisp


class BatchedUnrolledKernels(BatchedKernels):
    """out = fma_chain(x) over all 16 rows in one launch, with the unrolled loop."""

    def run(self) -> torch.Tensor:
        small_kernel_unrolled(self.lib, self.x, self.out, self.workload.iters, torch.cuda.current_stream(self.device),
                              pdl=False, threads=THREADS)
        return self.out


def get_benchmark() -> aisp.Benchmark:
    return BatchedUnrolledKernels()


if __name__ == "__main__":
    aisp.main(get_benchmark)
