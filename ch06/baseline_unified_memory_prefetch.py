"""Baseline unified memory prefetch (CUDA C++): managed memory pulled to the GPU by page faults.

Baseline: y = a * x + b over 64M floats (256 MiB) where x is managed memory (``cudaMallocManaged``)
that starts each call on the host (unified_memory.cu, ``um_run``): the kernel reads it directly,
every first touch of a page faults, and the driver migrates pages in fault batches while the
warps that wanted them wait: the PCIe link runs far below its 55 GB/s.
Optimized (optimized_unified_memory_prefetch.py): ``cudaMemPrefetchAsync(x, bytes, GPU, stream)``
before the kernel: the whole range moves in large DMA transfers, in stream order, and the kernel
reads device-resident pages. Same bytes over the link, same kernel, bitwise the same answer.
Each call first sends x back to the host (``cudaMemPrefetchAsync`` to the CPU, ~5 ms at the link
rate, the same step in both variants) so every call migrates the same 256 MiB; the timings include
it. Needs GPU page faulting (``cudaDevAttrConcurrentManagedAccess``): where the GPU or its VM lacks
it, setup() raises ``aisp.Unavailable`` and the pair is skipped with that reason.
Expect: measured on an H200: 40.7 -> 20.2 ms, 2.04x [1.77, 2.36]; the prefetched call at 13.3
GB/s for its 256 MiB host-to-device (24% of the ~55 GB/s pinned H2D rate; each call also sends
the buffer back to the host first, so ~27 GB/s counting both directions).
Run: python ch06/baseline_unified_memory_prefetch.py  |  aisp bench run -t ch06:unified_memory_prefetch
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import torch
from ch06_common import FLOAT, HERE, INT, LONG, PTR

import aisp
from aisp.kits import native


@dataclass(frozen=True, kw_only=True)
class ManagedWorkload(aisp.Workload):
    n: int = 1 << 26
    """Floats in the managed buffer: 256 MiB (keep it well under the GPU's free memory)."""
    a: float = 2.0
    b: float = 0.5


def _workload() -> ManagedWorkload:
    s = ManagedWorkload()
    return ManagedWorkload(flops=2.0 * s.n, bytes=4.0 * s.n, link="h2d", items=s.n, item_unit="elements",
                           precision="fp32", requires=native.REQUIRES, timeout_s=240,
                           ceiling_note="profiled (torch profiler, H200): kernel 138 us of a 24.5 ms window; 2 unnamed driver calls (the prefetches) hold the host 21.7 ms: ~25 GB/s a way")


WORKLOAD = _workload()
LIBRARY = native.Library((HERE / "unified_memory.cu",))


class FaultedManaged(aisp.Benchmark):
    """The kernel reads managed x straight from the host: page faults migrate it."""

    workload = WORKLOAD
    inputs = ("x",)
    scratch = ("y",)
    prefetch = 0

    def setup(self) -> None:
        w = self.workload
        self.lib = LIBRARY.load(self.device, {"um_run": [INT, PTR, PTR, FLOAT, FLOAT, LONG, PTR],
                                                    "um_free": [PTR]})
        if not self.lib.um_supported():
            raise aisp.Unavailable("GPU page faulting is not available here (cudaDevAttrConcurrentManagedAccess "
                                   "= 0, e.g. a VM without UVM fault support): unified_memory_prefetch cannot run")
        self.lib.um_alloc.restype, self.lib.um_alloc.argtypes = PTR, [ctypes.c_size_t]
        self.ptr = self.lib.um_alloc(4 * w.n)
        if not self.ptr:
            raise RuntimeError("cudaMallocManaged failed")
        # x: the managed buffer seen from the host, a CPU tensor (what the host writes and the GPU reads).
        self.x = torch.frombuffer((ctypes.c_float * w.n).from_address(self.ptr), dtype=torch.float32)
        self.x.copy_(torch.randn(w.n, device=self.device, generator=self.generator()).cpu())
        self.y = torch.empty(w.n, device=self.device)
        expected = self.x.to(self.device) * w.a + w.b
        torch.testing.assert_close(self.run(), expected, rtol=1e-6, atol=1e-6)

    def run(self) -> torch.Tensor:
        w = self.workload
        status = self.lib.um_run(self.prefetch, self.ptr, self.y.data_ptr(), w.a, w.b, w.n,
                                 native.stream(self.device))
        native.check(status, type(self).__name__)
        return self.y

    def teardown(self) -> None:
        if getattr(self, "ptr", None):
            torch.cuda.synchronize(self.device)
            del self.x
            native.check(self.lib.um_free(self.ptr), "cudaFree")
            self.ptr = None


def get_benchmark() -> aisp.Benchmark:
    return FaultedManaged()


if __name__ == "__main__":
    aisp.main(get_benchmark)
