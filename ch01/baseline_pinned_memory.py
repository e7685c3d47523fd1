"""Baseline pinned memory: a 128 MiB host-to-device copy from pageable memory.

Baseline: ``dst.copy_(src)`` with ``src`` in ordinary (pageable) host memory. The GPU's DMA
engine can only read page-locked memory, so the driver first copies each chunk into a pinned
staging buffer on the CPU, then DMAs it: two passes over the data, paced by a CPU memcpy, and
the call blocks the host until it is done.
Optimized (optimized_pinned_memory.py): ``src`` allocated pinned (``pin_memory()``, as a
DataLoader with ``pin_memory=True`` delivers it) and copied with ``non_blocking=True``: one DMA
straight from the source pages at the link's rate.
Expect: 5.5-9x on our H200 host (pageable 6-10 GB/s across runs, pinned 52-55 GB/s; the seed
says 2-6x: the pageable rate depends on the host's memcpy speed); the pinned copy should reach >= 80% of
the pinned H2D ceiling that ``aisp peak`` measures (55 GB/s).
Run: python ch01/baseline_pinned_memory.py  |  aisp bench run -t ch01:pinned_memory
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import aisp


@dataclass(frozen=True, kw_only=True)
class CopyWorkload(aisp.Workload):
    mib: int = 128


WORKLOAD = CopyWorkload(bytes=128.0 * 2**20, link="h2d", precision="exact", requires=aisp.Requirements(cuda=True))


class HostToDevice(aisp.Benchmark):
    """Copies a host tensor into a preallocated device buffer."""

    workload = WORKLOAD
    inputs = ("src",)
    scratch = ("dst",)
    pin = False

    def setup(self) -> None:
        count = self.workload.mib * 2**20 // 4
        self.src = torch.randn(count, generator=torch.Generator().manual_seed(self.seed))
        if self.pin:
            self.src = self.src.pin_memory()
        self.dst = torch.empty(count, device=self.device)

    def run(self) -> torch.Tensor:
        return self.dst.copy_(self.src, non_blocking=self.pin)


def get_benchmark() -> aisp.Benchmark:
    return HostToDevice()


if __name__ == "__main__":
    aisp.main(get_benchmark)
