"""Baseline ILP vs occupancy (CUDA C++): one element per thread, full occupancy, little in flight per thread.

Baseline: z = a * x + y on 64M fp32 elements (512 MiB read, 256 MiB written), one element per thread,
256-thread blocks covering the array (saxpy_ilp.cu, ``saxpy_one``): the textbook kernel, 100%
occupancy (64 warps per SM). Each thread issues two 4-byte loads, then waits several hundred ns for
DRAM: 64 warps x 32 threads x 8 bytes = 16 KB in flight per SM, short of what an SM's share of
4 TB/s needs over that latency (Little's law).
Optimized (optimized_ilp_vs_occupancy.py): 4 independent elements per thread (8 loads issued before
any is used) and a grid-stride loop over a grid of SMs x 4 blocks: 50% occupancy, twice the bytes
in flight. Occupancy is a means; bytes in flight are what hide latency. Bitwise-equal results.
``metrics()`` reports each variant's occupancy. See also occupancy_sweep.py.
Expect: 1.18x [1.17, 1.20] measured on an H200 (0.248 -> 0.209 ms); the optimized at 3.84 TB/s, 92% of the
HBM copy bandwidth (baseline 3.24 TB/s, 77%).
Run: python ch08/baseline_ilp_vs_occupancy.py  |  aisp bench run -t ch08:ilp_vs_occupancy
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch08_common import FLOAT, INT, LONG, PTR, bind, call, ints_out, library

import aisp
from aisp.kits import native


@dataclass(frozen=True, kw_only=True)
class SaxpyWorkload(aisp.Workload):
    n: int = 1 << 26
    a: float = 1.5
    block: int = 256


def _workload() -> SaxpyWorkload:
    s = SaxpyWorkload()
    return SaxpyWorkload(flops=2.0 * s.n, bytes=12.0 * s.n, items=s.n, item_unit="elements",
                         precision="exact", requires=native.REQUIRES)


WORKLOAD = _workload()
LIBRARY = library("saxpy_ilp.cu")
RUN_ARGS = [INT, INT, INT, INT, PTR, PTR, PTR, FLOAT, LONG, PTR]
INFO_ARGS = [INT, INT, INT, PTR, PTR]


class OneElementPerThread(aisp.Benchmark):
    """z = a x + y, one element per thread."""

    workload = WORKLOAD
    inputs = ("x", "y")
    scratch = ("z",)
    ilp = 0
    """Elements per thread per loop step (0: one per thread, no loop; saxpy_ilp.cu)."""
    blocks_per_sm = 0
    """Persistent grid: blocks per SM (ilp > 0 only)."""

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        lib = LIBRARY.load(self.device)
        self.run_fn, self.info_fn = bind(lib, "saxpy_run", RUN_ARGS), bind(lib, "saxpy_info", INFO_ARGS)
        self.x = torch.randn(w.n, generator=gen, device=self.device)
        self.y = torch.randn(w.n, generator=gen, device=self.device)
        self.z = torch.empty_like(self.x)
        torch.testing.assert_close(self.run(), self.y + w.a * self.x, rtol=1e-6, atol=1e-6)

    def run(self) -> torch.Tensor:
        w = self.workload
        call(self.run_fn, self.ilp, w.block, self.blocks_per_sm, 0, self.x.data_ptr(), self.y.data_ptr(),
             self.z.data_ptr(), w.a, w.n, native.stream(self.device))
        return self.z

    def metrics(self) -> dict[str, float]:
        regs, resident = ints_out(self.info_fn, self.ilp, self.workload.block, 0, count=2)
        blocks = min(resident, self.blocks_per_sm) if self.ilp else resident
        threads = torch.cuda.get_device_properties(self.device).max_threads_per_multi_processor
        return {"registers": float(regs), "occupancy": blocks * self.workload.block / threads}


def get_benchmark() -> aisp.Benchmark:
    return OneElementPerThread()


if __name__ == "__main__":
    aisp.main(get_benchmark)
