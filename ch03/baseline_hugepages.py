"""Baseline hugepages: a fresh 512 MiB host buffer faulted in 4 KiB pages.

Baseline: each run() maps a new anonymous 512 MiB host buffer (a staging area, a decoded shard, a
pinned-copy source before registration), marks it MADV_NOHUGEPAGE so the result does not depend on
this machine's THP setting, memsets it from one thread (first touch: 131,072 page faults, each
zeroing 4 KiB) and
reads one byte of every 4 KiB (one TLB entry per page), then unmaps it. The page-fault path and
TLB misses are the cost.
Optimized (optimized_hugepages.py): the same buffer with MADV_HUGEPAGE: with THP ``enabled`` at
``always`` or ``madvise`` the kernel backs it with 2 MiB pages (256 faults; 512x fewer TLB
entries). metrics() reports the minor faults per run and the huge-page bytes the buffer really got,
so a host with THP ``never`` shows why it gained nothing.
Expect: 3.16x measured on our H200 VM (THP madvise: 244 -> 77 ms, 131,072 -> 256 faults per
run); 1x with THP never. The first runs can be slower while the kernel compacts memory for 2 MiB
pages (THP defrag), which is what warmup absorbs.
Run: python ch03/baseline_hugepages.py  |  aisp bench run -t ch03:hugepages
"""

from __future__ import annotations

import ctypes
import mmap
import resource
from dataclasses import dataclass

import torch

import aisp
from aisp.peak.host import huge_page_bytes

PAGE = 4096


@dataclass(frozen=True, kw_only=True)
class BufferWorkload(aisp.Workload):
    mib: int = 512


# bytes: the fresh buffer, first-touched once, priced at aisp peak's first_touch (a fresh mapping memset by 1 thread).
WORKLOAD = BufferWorkload(bytes=float(BufferWorkload.mib << 20), link="page_faults", precision="exact",
                          ceiling_note="profiled (py-spy, 2-core CPU host): FreshBuffer._touch 99% of samples (a byte a 4 KiB page: the faults); THP never: 4 KiB faults only",
                          no_inputs_reason="run() maps, fills and reads a fresh buffer inside the call (the page "
                                           "faults are the work timed); its one input is the fill byte drawn in setup()",
                          window="idle")


class FreshBuffer(aisp.Benchmark):
    workload = WORKLOAD
    inputs = ()  # the buffer is made inside run(): see the workload's no_inputs_reason
    advice = mmap.MADV_NOHUGEPAGE

    def setup(self) -> None:
        gen = torch.Generator().manual_seed(self.seed)  # the buffer is host memory on every device
        self.value = int(torch.randint(1, 255, (1,), generator=gen).item())
        self.faults = 0
        self.huge = 0

    def _touch(self, keep_stats: bool) -> torch.Tensor:
        size = self.workload.mib << 20
        buf = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        buf.madvise(self.advice)
        view = torch.frombuffer(buf, dtype=torch.uint8)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        ctypes.memset(view.data_ptr(), self.value, size)  # first touch, one thread, like a memcpy
        total = view[::PAGE].sum(dtype=torch.int64)
        if keep_stats:
            self.faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
            self.huge = huge_page_bytes(view.data_ptr())
        del view
        buf.close()
        return total

    def run(self) -> torch.Tensor:
        return self._touch(keep_stats=False)

    def metrics(self) -> dict[str, float]:
        self._touch(keep_stats=True)
        return {"minor_faults_per_run": float(self.faults), "huge_page_mib": self.huge / 2**20}


def get_benchmark() -> aisp.Benchmark:
    return FreshBuffer()


if __name__ == "__main__":
    aisp.main(get_benchmark)
