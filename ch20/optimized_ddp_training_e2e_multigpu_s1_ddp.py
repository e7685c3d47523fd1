"""Optimized two-GPU GPT training, stage 1 of 4: DistributedDataParallel (ch04: dataparallel_multigpu).

Baseline (baseline_ddp_training_e2e_multigpu.py): rank 0 drives both GPUs through ``nn.DataParallel``
in fp32: per step a weight broadcast (676 MB), threads under one GIL, a gradient reduce onto GPU 0
and AdamW on GPU 0 while GPU 1 idles.
Optimized: one process per GPU, each with its own replica (broadcast once, when DDP wraps it) and
its 4 sequences. Autograd hooks hand gradients to DDP in 25 MB buckets, all-reduced by NCCL while
backward computes earlier layers'; then each rank runs the same AdamW update on its own replica,
both GPUs at once. No per-step replication, gather or reduce onto GPU 0.
Why faster: per step the ~2.5 ms replication and ~3 ms reduce leave, the 676 MB all-reduce
(~2.3 ms at ~290 GB/s) hides under ~24 ms of fp32 backward, and GPU 1 no longer waits for GPU 0's
AdamW. Still fp32: the GEMMs (~36 ms a step per GPU) dominate.
Expect (measured, 2 x H200, 2026-11-27, run 040354): 108.4 -> 98.63 ms, 1.09x over the baseline
(1.07x in an earlier run), MFU 3.5% (estimated ~78 ms, ~1.13x).
Run: aisp bench run -t ch20:ddp_training_e2e_multigpu
"""

from __future__ import annotations

from baseline_ddp_training_e2e_multigpu import WORKLOAD
from ch20_ddp import DDPTraining

import aisp


class DDPFp32(DDPTraining):
    workload = WORKLOAD


def get_benchmark() -> aisp.Benchmark:
    return DDPFp32()


if __name__ == "__main__":
    aisp.main(get_benchmark)
