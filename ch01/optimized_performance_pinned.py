"""Optimized performance basics (pinned): the naive loop, with its data in pinned host memory.

Baseline (baseline_performance.py): every micro-batch is copied from pageable memory with a
blocking ``.to(device)``; the host waits for the copy (and everything queued before it).
Optimized: the data set is pinned (page-locked) once in setup(), and micro-batches are copied
with ``non_blocking=True``: a DMA straight from the pinned pages, queued behind the previous
kernels, so the host keeps launching instead of waiting. Everything else is unchanged.
Expect: 1.0-1.06x on an H200 (within noise): the copies are 32 KiB, and the stalls they
cause are small next to the ~0.8 ms of host time eager autograd takes per micro-batch.
Run: python ch01/optimized_performance_pinned.py  |  aisp bench run -t ch01:performance
"""

from __future__ import annotations

from baseline_performance import CUDA_WORKLOAD, TrainingLoop

import aisp


class PinnedLoop(TrainingLoop):
    workload = CUDA_WORKLOAD
    pin = True


def get_benchmark() -> aisp.Benchmark:
    return PinnedLoop()


if __name__ == "__main__":
    aisp.main(get_benchmark)
