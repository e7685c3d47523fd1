"""Optimized NUMA-unaware: the same DataLoader pipeline bound to the GPU's NUMA node.

Baseline (baseline_numa_unaware.py): workers, main thread and staging buffers wherever the
scheduler and first touch put them.
Optimized: the GPU's local node and CPUs come from NVML (sysfs as fallback); each worker is bound to
one local core by its ``worker_init_fn`` (no CUDA call there; with fewer local cores than workers + 1
they share the local cores instead), the main thread and its intra-op pool to the remaining local cores (pool sized to them, so binding does not oversubscribe), and the
pinned staging buffers are allocated under a preferred-node memory policy, so every batch is
decoded, staged and DMA'd from memory next to the GPU. The binding is applied for run() only and
undone after, so the baseline timed in the same process stays unbound.
Expect: 1.23x on our one-node H200 VM (CPU placement only); more on a two-socket host for a
far-node GPU, where staging and decode output stop crossing the socket interconnect.
Run: python ch03/optimized_numa_unaware.py  |  aisp bench run -t ch03:numa_unaware
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from baseline_numa_unaware import UnboundPipeline

import aisp
from aisp.system import numa


class BoundPipeline(UnboundPipeline):
    def setup(self) -> None:
        self.locality = numa.device_locality(self.device.type, self.device.index or 0)
        self.main, self.init_worker = numa.split_for_workers(numa.local_binding(self.locality), self.workers)
        super().setup()

    def worker_init(self) -> numa.BindWorker:
        return self.init_worker

    @contextmanager
    def placement(self) -> Iterator[None]:
        threads = torch.get_num_threads()
        torch.set_num_threads(len(self.main.cpus))
        try:
            with numa.bound(self.main):
                yield
        finally:
            torch.set_num_threads(threads)


def get_benchmark() -> aisp.Benchmark:
    return BoundPipeline()


if __name__ == "__main__":
    aisp.main(get_benchmark)
