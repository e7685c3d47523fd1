"""Optimized gradient sync (2 GPUs), stock DDP: ~25 MB buckets all-reduced during backward.

Baseline (baseline_ddp_overlap_multigpu.py): backward, then one all-reduce of all 537 MB of gradients.
Optimized: ``DistributedDataParallel(model, bucket_cap_mb=25)`` with its defaults: each gradient is
copied into its bucket, the bucket divided by the world size, all-reduced during backward, and
copied back into ``.grad`` after it. Those copies and the division are ~0.9 ms of extra HBM passes
a step (profiled, 2 x H200), which optimized_ddp_overlap_multigpu.py removes.
Expect (measured, 2 x H200, 2026-11-27): 8.071 -> 7.886 ms, 1.02x (whole-chapter run; 7.875 ms,
1.02x in another), against 7.773 ms for optimized_ddp_overlap_multigpu.py; peak memory 1.88 GB.
Run: aisp bench run -t ch04:ddp_overlap_multigpu
"""

from __future__ import annotations

from baseline_ddp_overlap_multigpu import WORKLOAD
from ch04_dataparallel import DDPStep

import aisp


class StockDDP(DDPStep):
    workload = WORKLOAD


def get_benchmark() -> aisp.Benchmark:
    return StockDDP()


if __name__ == "__main__":
    aisp.main(get_benchmark)
