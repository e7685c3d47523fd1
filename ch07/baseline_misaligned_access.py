"""Baseline misaligned access (CUDA C++): copy 128M floats that start 4 bytes past a 16-byte boundary.

Baseline: the source is ``x[1:]`` and the destination ``out[1:]`` (a payload behind a 4-byte header,
a slice that drops the first element): neither pointer is 16-byte aligned, so the kernel cannot use
128-bit accesses and copies one float per thread (misaligned_copy.cu, ``copy_scalar``). Each warp's
128 bytes straddle 5 sectors instead of 4, and 4 bytes per thread in flight are too few to cover
DRAM latency on a ~4 TB/s GPU.
Optimized (optimized_misaligned_access.py): both pointers share their misalignment, so after a head
of 3 scalar elements both are aligned: a float4 body, then a 1-element scalar tail, in one launch
(``copy_peeled``). Same bytes, same result (a copy).
Expect (measured, H200): 0.428 ms -> 0.275 ms, 1.56x [1.55, 1.57]; optimized 3,910 GB/s (93% of
the HBM copy), the baseline 2,508 GB/s (59%; chapter 1 measured 60% for one float per thread,
aligned). H100: not measured.
Run: python ch07/baseline_misaligned_access.py  |  aisp bench run -t ch07:misaligned_access
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch07_common import LONG, PTR, library

import aisp
from aisp.kits import native
from aisp.kits.native import ptr


@dataclass(frozen=True, kw_only=True)
class CopyWorkload(aisp.Workload):
    elements: int = 1 << 27
    offset: int = 1
    """Floats between the allocation's (16-byte aligned) start and the copied region."""


def _copy_workload() -> CopyWorkload:
    s = CopyWorkload()
    return CopyWorkload(bytes=8.0 * s.elements, items=s.elements, item_unit="floats", precision="exact",
                        requires=native.REQUIRES)


WORKLOAD = _copy_workload()
LIBRARY = library("misaligned_copy.cu")
SIGNATURES = {"copy_scalar_run": [PTR, PTR, LONG, PTR], "copy_peeled_run": [PTR, PTR, LONG, PTR]}


class ScalarCopy(aisp.Benchmark):
    """out[offset:] = x[offset:], both regions 4 bytes past a 16-byte boundary."""

    workload = WORKLOAD
    inputs = ("x",)
    scratch = ("out",)
    entry = "copy_scalar_run"

    def setup(self) -> None:
        w = self.workload
        self.lib = LIBRARY.load(self.device, SIGNATURES)
        self.x = torch.randn(w.offset + w.elements, device=self.device, generator=self.generator())
        self.out = torch.empty_like(self.x)
        if self.x[w.offset:].data_ptr() % 16 != 4:
            raise RuntimeError("the copied region must start 4 bytes past a 16-byte boundary")
        torch.testing.assert_close(self.run(), self.x[w.offset:], rtol=0, atol=0)

    def run(self) -> torch.Tensor:
        w = self.workload
        src, dst = self.x[w.offset:], self.out[w.offset:]
        native.check(getattr(self.lib, self.entry)(ptr(src), ptr(dst), w.elements, native.stream(self.device)),
                     type(self).__name__)
        return dst


def get_benchmark() -> aisp.Benchmark:
    return ScalarCopy()


if __name__ == "__main__":
    aisp.main(get_benchmark)
