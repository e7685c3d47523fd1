"""Baseline launch bounds (CUDA C++): a degree-47 polynomial per element, 64 registers per thread.

Baseline: y = p(x) over 64M floats by Horner's rule (launch_bounds.cu, ``horner_free``): each
thread loads the 48 coefficients once and keeps them in registers across its grid-stride loop.
Without bounds, ptxas spends 64 registers per thread, so an SM holds 4 blocks of 256 threads:
1,024 of 2,048 thread slots (50% occupancy). 94 FLOPs and 8 bytes per element put the kernel at
the fp32 ridge point (11.75 FLOP/byte vs 51 TFLOP/s / 4.2 TB/s = 12): it needs both many loads
in flight and a busy FMA pipe, and the 47-FMA dependent chain per element needs warps to hide it.
Optimized (optimized_launch_bounds.py): the same source with ``__launch_bounds__(256, 8)``:
ptxas caps registers at 32, keeps a few coefficients in L1-resident local memory, and an SM holds
8 blocks (100%). Same FMAs in the same order: bitwise the same answer.
Expect: measured on an H200: 0.269 -> 0.240 ms, 1.13x [1.12, 1.13]; the optimized at 26.3
TFLOP/s and 2,238 GB/s (53% of the HBM copy ceiling, 39% of the ~67 TFLOP/s FMA peak; not
profiled).
Run: python ch06/baseline_launch_bounds.py  |  aisp bench run -t ch06:launch_bounds
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch06_common import HERE, INT, LONG, PTR

import aisp
from aisp.kits import native


@dataclass(frozen=True, kw_only=True)
class PolynomialWorkload(aisp.Workload):
    n: int = 1 << 26
    """Elements: 256 MiB in, 256 MiB out."""
    terms: int = 48
    """Coefficients (degree 47): must match kCoefficients in launch_bounds.cu."""


def _workload() -> PolynomialWorkload:
    s = PolynomialWorkload()
    return PolynomialWorkload(flops=2.0 * (s.terms - 1) * s.n, bytes=8.0 * s.n, items=s.n,
                              # fp32_simt: a per-element Horner chain of FFMAs, no tensor-core form
                              item_unit="elements", precision="fp32_simt", requires=native.REQUIRES,
                              ceiling_note="ncu (H200): horner_async 144.6 us, SM 79%, DRAM 74% (3.57 TB/s), L2 86%, top stall not_selected 9.2: FMA issue and HBM overlapped at the fp32 ridge")


WORKLOAD = _workload()
LIBRARY = native.Library((HERE / "launch_bounds.cu",))


def horner_reference(x: torch.Tensor, coef: torch.Tensor) -> torch.Tensor:
    """p(x) in float64, highest-degree coefficient first (as the kernel)."""
    acc = torch.full_like(x, float(coef[0]), dtype=torch.float64)
    for c in coef[1:].double():
        acc = acc * x.double() + c
    return acc.float()


class FreeRegistersPolynomial(aisp.Benchmark):
    """y = p(x) with ``horner_free`` (64 registers, 4 blocks of 256 per SM)."""

    workload = WORKLOAD
    inputs = ("x",)
    scratch = ("y",)
    kernel = 0
    """launch_bounds.cu's kernel: 0 horner_free, 1 horner_bounded, 2 horner_fitted,
    3 horner_pipelined, 4 horner_async."""

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        self.lib = LIBRARY.load(self.device, {"horner_run": [INT, INT, PTR, PTR, PTR, LONG, PTR]})
        if self.lib.horner_terms() != w.terms:
            raise RuntimeError("launch_bounds.cu's kCoefficients differs from the workload's terms")
        self.grid = self.lib.horner_grid(self.kernel)
        native.check(int(self.grid <= 0), "cudaOccupancyMaxActiveBlocksPerMultiprocessor")
        self.x = torch.rand(w.n, device=self.device, generator=gen) * 2 - 1
        self.coef = torch.randn(w.terms, device=self.device, generator=gen) / torch.arange(
            1, w.terms + 1, device=self.device)
        self.y = torch.empty_like(self.x)
        torch.testing.assert_close(self.run(), horner_reference(self.x, self.coef), rtol=1e-4, atol=1e-5)

    def run(self) -> torch.Tensor:
        status = self.lib.horner_run(self.kernel, self.grid, self.x.data_ptr(), self.coef.data_ptr(),
                                     self.y.data_ptr(), self.workload.n, native.stream(self.device))
        native.check(status, type(self).__name__)
        return self.y


def get_benchmark() -> aisp.Benchmark:
    return FreeRegistersPolynomial()


if __name__ == "__main__":
    aisp.main(get_benchmark)
