"""Optimized gradient sync (2 GPUs): DDP with gradients as bucket views, its all-reduces on a
16-SM high-priority communicator, backward's GEMMs leaving those 16 SMs free.

Baseline (baseline_ddp_overlap_multigpu.py): backward, then one all-reduce of all 537 MB of gradients.
Optimized: DDP as in optimized_ddp_overlap_multigpu.py, plus the settings that decide whether its
overlap happens at all on a fast link. A large cuBLAS GEMM launches a CTA per SM and holds every SM
until it ends, so an all-reduce kernel launched beside it waits for SMs: the "overlap" serializes.
Here backward runs under ``kits.multirank.gemm_carveout(16)`` (cuBLAS GEMMs target 116 of 132 SMs)
and DDP's all-reduces run on a second NCCL communicator (``lean_group(16)``: ``max_ctas=16``, a
high-priority stream), so each bucket's all-reduce starts as soon as it is ready, beside the next
layer's GEMMs; ``gradient_as_bucket_view=True`` drops the copy between gradients and buckets.
The GEMMs lose ~12% of their SMs while they run; the all-reduce (~1.7 ms of a ~5.4 ms step) hides.
Expect (measured, 2 x H200, 2026-11-27): NOT faster: 5.553 ms vs 5.347, 1.00x [0.88, 1.14], the best
variant of that run (estimated 1.1-1.3x); without the carveout and with 8 CTAs it measured 0.78x.
Run: aisp bench run -t ch04:ddp_overlap_multigpu
"""

from __future__ import annotations

from baseline_ddp_overlap_multigpu import WORKLOAD
from ch04_dataparallel import DDPStep

import aisp


class LeanDDP(DDPStep):
    workload = WORKLOAD
    bucket_view = True
    comm_ctas = 16
    carveout = 16


def get_benchmark() -> aisp.Benchmark:
    return LeanDDP()


if __name__ == "__main__":
    aisp.main(get_benchmark)
