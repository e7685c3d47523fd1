"""Baseline data parallelism (2 GPUs): ``nn.DataParallel``, one process driving both GPUs.

Baseline: a training step of an 8 x Linear(2048) MLP (bf16 autocast, fp32 weights and gradients) on a
global batch of 8,192 samples. Rank 0 runs it through ``nn.DataParallel`` over both GPUs: every call
scatters the batch from GPU 0, replicates the model (broadcasts 134 MB of weights to GPU 1), runs one
Python thread per GPU (the GIL serializes their kernel launches), gathers the outputs to GPU 0 and
reduces the gradients onto GPU 0. The harness starts one process per GPU; DataParallel is a single
process, so rank 1 only waits for the loss (on the host, so no kernel of its own sits on GPU 1 while
rank 0 uses it). Rank 0 returns (loss, gradients), rank 1 (loss,); the time is the slowest rank's.
Optimized (optimized_dataparallel_multigpu.py): DDP, one process per GPU, each on its 4,096 samples;
no per-step replication, scatter or gather, gradients all-reduced in buckets during backward.
Expect (measured, 2 x H200, 2026-11-26): 10.24 -> 5.739 ms, 1.78x [1.50, 2.11] (estimated 1.5-3x). The
first run failed verification: DataParallel's replica threads inherit autocast's on/off but not its
dtype (thread-local, fp16 by default), so the replicas ran in fp16 and 85% of the gradient elements
were off by more than 5% (fp16's range flushes the MLP's ~1e-5 gradients). Autocast now opens
inside the module's forward (ch04_dataparallel.BF16Forward), and a multigpu test shows the dtype.
Run: aisp bench run -t ch04:dataparallel_multigpu  (the harness starts 2 ranks under torchrun)
"""

from __future__ import annotations

from ch04_common import step_workload
from ch04_dataparallel import DataParallelStep

import aisp

WORKLOAD = step_workload(ceiling_note="profiled (torch profiler, 2xH200): rank 1's kernels 2.72 ms a step: GEMMs 1.10, fp32 grad "
                                      "all-reduce 0.89 (5 calls), GELU, casts and copies 0.7")


class Baseline(DataParallelStep):
    workload = WORKLOAD


def get_benchmark() -> aisp.Benchmark:
    return Baseline()


if __name__ == "__main__":
    aisp.main(get_benchmark)
