"""Baseline gradient sync (2 GPUs): backward first, then one all-reduce of all the gradients.

Baseline: each rank runs forward and backward of an 8 x Linear(2048) MLP (bf16 autocast, fp32
weights and gradients, 33.6 M parameters) on its 4,096 of a global batch of 8,192 samples, then
flattens the gradients and all-reduces them (134 MB) in one NCCL call. One call is the competent
way to sync after backward (see gradient_bucketing_multigpu for one call per parameter); but NVLink
idles during backward and the GPU's SMs idle during the all-reduce.
Optimized (optimized_ddp_overlap_multigpu.py): DDP's ~25 MB buckets, all-reduced as backward
produces them, so communication overlaps the earlier layers' gradient GEMMs.
Expect (estimate, not yet measured; needs 2 GPUs): 1.1-1.3x on 2 x H200; the ceiling is
max(backward, all-reduce) + forward instead of their sum (the all-reduce ~0.4 ms at ~360 GB/s bus
bandwidth against ~1.4 ms of GEMMs).
Run: aisp bench run -t ch04:ddp_overlap_multigpu  (the harness starts 2 ranks under torchrun)
"""

from __future__ import annotations

from ch04_common import step_workload
from ch04_dataparallel import AllReduceAfterBackward

import aisp

WORKLOAD = step_workload()


class Baseline(AllReduceAfterBackward):
    workload = WORKLOAD


def get_benchmark() -> aisp.Benchmark:
    return Baseline()


if __name__ == "__main__":
    aisp.main(get_benchmark)
