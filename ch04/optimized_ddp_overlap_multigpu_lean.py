"""Optimized gradient sync (2 GPUs): DDP with gradients as bucket views, on a communicator capped at 8 SMs.

Baseline (baseline_ddp_overlap_multigpu.py): backward, then one all-reduce of all 134 MB of gradients.
Optimized: DDP as in optimized_ddp_overlap_multigpu.py, plus the two settings that decide whether its
overlap pays on a fast link: ``gradient_as_bucket_view=True`` (no 134 MB copy between the gradients
and DDP's buckets each step) and its all-reduces on a second NCCL communicator created with
``max_ctas=8``, so the NCCL kernels running beside backward's GEMMs hold 8 SMs, not NCCL's default
16-32.
Expect (estimate, not yet measured on the new size): at or a little above the plain DDP variant.
History (measured, 2 x H200, 2026-11-26, at the old size): 0.86x, the best of the pair's variants.
Run: aisp bench run -t ch04:ddp_overlap_multigpu
"""

from __future__ import annotations

from baseline_ddp_overlap_multigpu import WORKLOAD
from ch04_dataparallel import DDPStep

import aisp


class LeanDDP(DDPStep):
    workload = WORKLOAD
    bucket_view = True
    comm_ctas = 8


def get_benchmark() -> aisp.Benchmark:
    return LeanDDP()


if __name__ == "__main__":
    aisp.main(get_benchmark)
