"""Optimized stream priority, green-context variant with the chain's loop at its floor: the chain on
SMs of its own (optimized_stream_priority_green.py), each of its kernels running fma_dependent's loop
shape with one warp on each SM sub-partition.

Baseline (baseline_stream_priority.py): the chain of 64 small dependent kernels on a stream of the
bulk's priority waits behind each bulk pass: its latency ~ bulk + chain.
Optimized: optimized_stream_priority_green.py (the PDL chain on a high-priority stream of a 16-SM green
context, the bulk on the other 116), with each chain kernel launched as ``small_kernel_unrolled``
(ch11_kernels.cu): the same 15,000 FMAs per element in the same order (bit for bit the same output),
in a loop of 64 FMAs a trip whose sm_90 SASS holds 515 stall cycles per 128 FMAs (4.02 an FMA, the
floor's loop; the plain loop's 67 per 16 is 4.19), and the same 2,048 threads in 16 blocks of 128
instead of 8 of 256: one warp on each of an SM's four schedulers, as when fma_dependent measured its
4.05 cycles an FMA (one warp), where 8 warps an SM put two on each. The 16 blocks fill the chain's 16
SMs one an SM (PDL's next kernel waits beside them). What the green variant measured: 2.491 / 2.486
ms, 38.9 us a step for 30.7 us of FMAs at the floor.
Expect: measured (H200 of a 2 x H200 host, 2026-11-30, two runs of 20 samples): 2.3209 / 2.3234 ms
against the green variant's 2.4923 / 2.4931 and the baseline's 3.477 / 3.4776 in the same runs:
1.498x [1.495, 1.501] / 1.496x [1.494, 1.498], 84.7% / 84.6% of the 1.965 ms ceiling (green: 78.9%),
the pair's best. Estimated 2.31-2.42 ms, 81-85%; measured 2.32 ms, 85%: the top of the estimate,
~2.7 us less a step than the green variant (arithmetic from the medians; not profiled).
Run: python ch11/optimized_stream_priority_green_unrolled.py  |  aisp bench run -t ch11:stream_priority
"""

from __future__ import annotations

import torch
from ch11_common import small_kernel_unrolled
from optimized_stream_priority_green import SmPartition

import aisp


class SmPartitionUnrolled(SmPartition):
    """SmPartition whose chain kernels run the unrolled loop in blocks of ``chain_threads``."""

    chain_threads = 128
    """Threads a chain block: 4 warps, one for each scheduler of its SM (2,048 / 128 = 16 blocks)."""

    def step(self, src: torch.Tensor, dst: torch.Tensor, stream: torch.cuda.Stream) -> None:
        small_kernel_unrolled(self.lib, src, dst, self.workload.chain_iters, stream, pdl=self.pdl,
                              threads=self.chain_threads)


def get_benchmark() -> aisp.Benchmark:
    return SmPartitionUnrolled()


if __name__ == "__main__":
    aisp.main(get_benchmark)
