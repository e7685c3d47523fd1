"""Baseline coalescing (CUDA C++): out = a * in + b with each warp striding down a column.

Baseline: an 8192x8192 fp32 matrix (256 MiB in, 256 MiB out), one element per thread, thread t
on row t % 8192 and column t / 8192 (coalescing.cu, ``scale_strided``). The 32 threads of a
warp touch 32 different rows, so each warp-wide load or store is 32 separate 32-byte sectors
carrying 4 useful bytes each; DRAM and L2 move up to 8x the bytes the kernel needs.
Optimized (optimized_coalescing.py): thread t on element t; a warp's 32 accesses are 128
contiguous bytes (4 sectors, fully used). optimized_coalescing_float4.py: coalesced and 16
bytes per thread. Same arithmetic, same result, same bytes requested.
Expect: ~6x on an H100/H200 (coalesced, ~60% of the HBM copy bandwidth with one float per
thread), ~8x with float4 (>= 80% of the copy bandwidth ``aisp peak`` measures).
Run: python ch01/baseline_coalescing.py  |  aisp bench run -t ch01:coalescing
     |  cd ch01 && make && ./bin/coalescing_sm90
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

import torch

import aisp
from aisp.kits import native

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True, kw_only=True)
class MatrixWorkload(aisp.Workload):
    rows: int = 8192
    cols: int = 8192
    a: float = 1.5
    b: float = -0.25


def _matrix_workload() -> MatrixWorkload:
    s = MatrixWorkload()
    return MatrixWorkload(flops=2.0 * s.rows * s.cols, bytes=8.0 * s.rows * s.cols, items=s.rows * s.cols,
                          item_unit="elements", precision="exact", requires=native.REQUIRES)


WORKLOAD = _matrix_workload()
LIBRARY = native.Library((HERE / "coalescing.cu",), flags=("-DCH01_LIBRARY",))


class StridedScale(aisp.Benchmark):
    """out = a * in + b, threads mapped to elements column by column."""

    workload = WORKLOAD
    inputs = ("x",)
    scratch = ("out",)
    mode = 0
    """0: strided, 1: coalesced, 2: coalesced float4 (coalescing.cu)."""

    def setup(self) -> None:
        w = self.workload
        self.lib = LIBRARY.load(self.device)
        p, i = ctypes.c_void_p, ctypes.c_int
        self.lib.coalescing_run.argtypes = [i, p, p, i, i, ctypes.c_float, ctypes.c_float, p]
        self.x = torch.randn(w.rows, w.cols, device=self.device, generator=self.generator())
        self.out = torch.empty_like(self.x)
        torch.testing.assert_close(self.run(), (self.x.double() * w.a + w.b).float())

    def run(self) -> torch.Tensor:
        w = self.workload
        status = self.lib.coalescing_run(self.mode, self.x.data_ptr(), self.out.data_ptr(), w.rows, w.cols,
                                         w.a, w.b, native.stream(self.device))
        native.check(status, type(self).__name__)
        return self.out


def get_benchmark() -> aisp.Benchmark:
    return StridedScale()


if __name__ == "__main__":
    aisp.main(get_benchmark)
