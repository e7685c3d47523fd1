"""Baseline gradient sync (2 GPUs): backward first, then one all-reduce of all the gradients.

Baseline: each rank runs forward and backward of an 8 x Linear(2048) MLP (bf16 autocast, fp32
weights and gradients, 33.6 M parameters) on its 4,096 of a global batch of 8,192 samples, then
flattens the gradients and all-reduces them (134 MB) in one NCCL call. One call is the competent
way to sync after backward (see gradient_bucketing_multigpu for one call per parameter); but NVLink
idles during backward and the GPU's SMs idle during the all-reduce.
Optimized (optimized_ddp_overlap_multigpu.py): DDP's ~25 MB buckets, all-reduced as backward
produces them, so communication overlaps the earlier layers' gradient GEMMs.
Expect (measured, 2 x H200, 2026-11-26): SLOWER (estimated 1.1-1.3x). Best variant, the lean one:
3.846 -> 4.383 ms, 0.86x [0.78, 0.96] (plain DDP 4.646 ms, 0.84x, in the same run; first run 3.20 ->
3.753 ms, 0.84x [0.81, 0.88]). The 134 MB all-reduce takes ~0.45 ms at ~300 GB/s against ~3 ms of
step, so overlap can hide at most ~0.45 ms, and DDP's per-step costs plus NCCL's kernels beside
backward's GEMMs cost more. A documented negative result; next: a smaller per-rank batch
(communication a larger share) and a profile of the DDP step.
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
