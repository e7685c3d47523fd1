"""Baseline tiled matmul (CUDA C++): C = A @ B in fp32 (4096 x 2048 @ 2048 x 4096), from global memory.

Baseline: one output per thread, 32x8 threads per block (tiled_matmul.cu, ``matmul_naive``): each
FMA loads one element of A (the same for the 32 threads of a warp: a broadcast) and one of B
(coalesced); L1 and L2 catch most of the reuse, but every FMA waits on a load instruction, so the
kernel is bound by load issue and latency, far below the FP32 FMA rate.
Optimized: optimized_tiled_matmul_smem.py stages 32x32 tiles of A and B in shared memory (each
global load feeds 32 FMAs, each FMA still reads two shared words); optimized_tiled_matmul.py adds
register blocking: 128x128 block tiles, each of 256 threads keeps an 8x8 block of C in registers
and does 64 FMAs per 4 128-bit shared loads. All three sum each output's 2,048 products in the
same order with fmaf: the results agree bit for bit.
Expect (measured, H200): baseline 9.77 ms (7.0 TFLOP/s); smem 7.35 ms, 1.33x [1.33, 1.33];
register-blocked 1.78 ms, 5.51x [5.50, 5.51], 38.7 TFLOP/s (76% of cuBLAS's fp32 51 TFLOP/s, 58% of
the ~67 TFLOP/s FMA peak); cp.async-fed (optimized_tiled_matmul_async.py, the best since 2026-11-29)
1.546 / 1.541 ms, 6.33x / 6.34x, 71% of the measured 62.8 TFLOP/s FFMA rate. H100: not measured.
Run: python ch07/baseline_tiled_matmul.py  |  aisp bench run -t ch07:tiled_matmul
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch07_common import INT, PTR, library

import aisp
from aisp.kits import native
from aisp.kits.native import ptr


@dataclass(frozen=True, kw_only=True)
class MatmulWorkload(aisp.Workload):
    m: int = 4096
    n: int = 4096
    k: int = 2048


def _matmul_workload() -> MatmulWorkload:
    s = MatmulWorkload()
    return MatmulWorkload(flops=2.0 * s.m * s.n * s.k, bytes=4.0 * (s.m * s.k + s.k * s.n + s.m * s.n),
                          # fp32_simt: the lesson's CUDA-core GEMM (fmaf in fp32); tensor cores run TF32, not an fp32 FMA
                          items=s.m * s.n, item_unit="outputs", precision="fp32_simt", requires=native.REQUIRES,
                          ceiling_note="ncu (H200): matmul_async SM 75.9%, FFMA shares issue with LDS; _cutlass (best, not profiled) 79-80% as cuBLAS SGEMM (81%)")


WORKLOAD = _matmul_workload()
LIBRARY = library("tiled_matmul.cu")


class NaiveMatmul(aisp.Benchmark):
    """c = a @ b, fp32, row-major."""

    workload = WORKLOAD
    inputs = ("a", "b")
    scratch = ("c",)
    mode = 0
    """tiled_matmul.cu: 0 global memory, 1 shared-memory tiles, 2 tiles + register blocking, 3 the same fed by
    cp.async, 4 mode 3 with paired lanes (2-wavefront 128-bit shared loads)."""

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        self.lib = LIBRARY.load(self.device, {"matmul_run": [INT, PTR, PTR, PTR, INT, INT, INT, PTR]})
        self.a = torch.randn(w.m, w.k, device=self.device, generator=gen)
        self.b = torch.randn(w.k, w.n, device=self.device, generator=gen)
        self.c = torch.empty(w.m, w.n, device=self.device)
        # fp64 reference: |c| ~ 45; fp32 rounding over 2,048 sequential FMAs stays below 1e-3.
        torch.testing.assert_close(self.run(), (self.a.double() @ self.b.double()).float(), rtol=1e-4, atol=1e-3)

    def run(self) -> torch.Tensor:
        w = self.workload
        status = self.lib.matmul_run(self.mode, ptr(self.a), ptr(self.b), ptr(self.c), w.m, w.n, w.k,
                                     native.stream(self.device))
        native.check(status, type(self).__name__)
        return self.c


def get_benchmark() -> aisp.Benchmark:
    return NaiveMatmul()


if __name__ == "__main__":
    aisp.main(get_benchmark)
