"""Baseline gradient sync (2 GPUs): backward first, then one all-reduce of all the gradients.

Baseline: each rank runs forward and backward of an 8 x Linear(4096) MLP (bf16 autocast, fp32
weights and gradients, 134 M parameters) on its 1,024 of a global batch of 2,048 samples, then
flattens the gradients and all-reduces them (537 MB) in one NCCL call. One call is the competent
way to sync after backward (see gradient_bucketing_multigpu for one call per parameter); but NVLink
idles during backward and the GPU's SMs idle during the all-reduce. At this size the two are alike
(~0.8 TFLOP per rank, ~1.5 ms; 537 MB at ~320 GB/s bus bandwidth, ~1.7 ms), as with a large model
on a small per-GPU batch: the case overlap is for.
Optimized (optimized_ddp_overlap_multigpu.py): DDP's ~25 MB buckets, all-reduced as backward
produces them, so communication overlaps the earlier layers' gradient GEMMs.
Expect (measured, 2 x H200, 2026-11-27): NOT faster (estimated 1.2-1.4x). Two runs at this size:
5.356 -> 5.512 ms, 0.97x [0.88, 1.07] (plain DDP best; the lean variant then 0.78x), and 5.347 ->
5.553 ms, 1.00x [0.88, 1.14] (the lean variant with a 16-SM GEMM carveout best; plain DDP 0.98x);
the steps are noisy (cv 4-12%). History (2026-11-26): at 33.6 M parameters and 4,096 samples per
rank (a 0.45 ms all-reduce in a ~3 ms step) DDP measured 0.84-0.86x. Neither size shows overlap
paying here; where the collective's kernels run during backward is not yet profiled.
Run: aisp bench run -t ch04:ddp_overlap_multigpu  (the harness starts 2 ranks under torchrun)
"""

from __future__ import annotations

from ch04_common import step_workload
from ch04_dataparallel import AllReduceAfterBackward

import aisp

WORKLOAD = step_workload(batch=2048, width=4096)


class Baseline(AllReduceAfterBackward):
    workload = WORKLOAD


def get_benchmark() -> aisp.Benchmark:
    return Baseline()


if __name__ == "__main__":
    aisp.main(get_benchmark)
