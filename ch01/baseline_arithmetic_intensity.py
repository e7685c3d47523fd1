"""Baseline arithmetic intensity (CUDA C++): a degree-8 polynomial over 10M floats, one pass per Horner step.

Baseline: ``y = p(x)`` evaluated as 8 elementwise kernels (arithmetic_intensity.cu, variant 0),
one float per thread; each pass reads x and y and writes y: 16 FLOPs for 92 bytes per
element, 0.17 FLOP/byte, far below the ridge point (~10 FLOP/byte on an H200 in fp32), so the
time is the 920 MB it moves.
Optimized: optimized_arithmetic_intensity_{unrolled,vectorized,more_flops,fused}.py: 4 floats
per thread, float4 accesses, 4 Horner steps per pass (20 B/element, 0.8 FLOP/B), and one fused
pass (8 B/element, 2 FLOP/B). Same fmaf chain in the same order: bitwise-equal results.
Expect: on an H200, unrolled and vectorized ~1.25x (one load in flight per thread leaves the
baseline at ~3.0 TB/s; 4 per thread reach ~3.9), more FLOPs 4.5-4.9x, fused 7.5-9x: once the
kernel streams at HBM speed, only moving fewer bytes per FLOP makes it faster.
Run: python ch01/baseline_arithmetic_intensity.py  |  aisp bench run -t ch01:arithmetic_intensity
     |  cd ch01 && make && ./bin/arithmetic_intensity_sm90
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

import torch

import aisp
from aisp.kits import native

HERE = Path(__file__).resolve().parent

COEFFICIENTS = (1 / 9, -1 / 8, 1 / 7, -1 / 6, 1 / 5, -1 / 4, 1 / 3, -1 / 2, 1.0)
"""p(x) = sum c[j] x^(8-j): the same polynomial as the standalone binary."""


@dataclass(frozen=True, kw_only=True)
class PolyWorkload(aisp.Workload):
    n: int = 10_000_000
    degree: int = 8


def _poly_workload() -> PolyWorkload:
    s = PolyWorkload()
    # One fused multiply-add (2 FLOPs) per degree; fewest bytes: read x once, write y once.
    return PolyWorkload(flops=2.0 * s.degree * s.n, bytes=8.0 * s.n, items=s.n, item_unit="elements",
                        precision="fp32", requires=native.REQUIRES,
                        ceiling_note="80 MB at the HBM peak is 19.2 us; the fused call takes 23-24 us (79.8-82.1% in four H200 runs, 2026-11-29): the ramp and tail of one short kernel")


WORKLOAD = _poly_workload()
LIBRARY = native.Library((HERE / "arithmetic_intensity.cu",), flags=("-DCH01_LIBRARY",))


class Polynomial(aisp.Benchmark):
    """y = p(x) by one of the six kernels of arithmetic_intensity.cu."""

    workload = WORKLOAD
    inputs = ("x",)
    scratch = ("y",)
    variant = 0

    def setup(self) -> None:
        self.lib = LIBRARY.load(self.device)
        p = ctypes.c_void_p
        self.lib.ai_run.argtypes = [ctypes.c_int, p, p, ctypes.c_int, ctypes.POINTER(ctypes.c_float), p]
        self.coef = (ctypes.c_float * len(COEFFICIENTS))(*COEFFICIENTS)
        self.x = torch.rand(self.workload.n, device=self.device, generator=self.generator()) * 2 - 1
        self.y = torch.empty_like(self.x)
        reference = torch.zeros_like(self.x, dtype=torch.float64)
        for c in COEFFICIENTS:
            reference = reference * self.x + c
        torch.testing.assert_close(self.run(), reference.float(), rtol=1e-5, atol=1e-5)

    def run(self) -> torch.Tensor:
        status = self.lib.ai_run(self.variant, self.x.data_ptr(), self.y.data_ptr(), self.workload.n,
                                 self.coef, native.stream(self.device))
        native.check(status, f"arithmetic_intensity variant {self.variant}")
        return self.y


def get_benchmark() -> aisp.Benchmark:
    return Polynomial()


if __name__ == "__main__":
    aisp.main(get_benchmark)
