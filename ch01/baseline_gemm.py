"""Baseline GEMM (CUDA C++): 40 small matrix products as 40 separate cublasSgemm calls.

Baseline: 40 products of 128x128 @ 128x128 fp32 (gemm_batched.cu, ``gemm_loop``): each call
is ~4 MFLOP, a few microseconds of GPU work that fills only a fraction of the SMs, and each
pays its own launch; the GPU runs 40 small kernels one after another.
Optimized: optimized_gemm.py (one ``cublasSgemmBatched`` call on arrays of pointers) and
optimized_gemm_strided.py (one ``cublasSgemmStridedBatched`` call, fixed strides): one launch
whose grid covers all 40 products. Same FLOPs, same bytes.
Expect: ~12x on an H200 in the harness (one timed call carries ~15 us of launch latency);
36-40x in the standalone binary's back-to-back loop (the seed says 20-40x).
Every variant's setup() also checks its product against ``torch.bmm`` on the GPU.
Run: python ch01/baseline_gemm.py  |  aisp bench run -t ch01:gemm  |  cd ch01 && make && ./bin/gemm_batched_sm90
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

import find_cublas
import torch

import aisp
from aisp.kits import native

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True, kw_only=True)
class GemmWorkload(aisp.Workload):
    batch: int = 40
    m: int = 128
    n: int = 128
    k: int = 128


def _gemm_workload() -> GemmWorkload:
    s = GemmWorkload()
    # fp32 sums of 128 products of unit normals (|c| ~ 11 rms, ~50 at most): reduction order differs by
    # ~1e-6 relative; element_tol 2e-6 of max|c| (1e-4 absolute, ~33 fp32 roundings of max|c|).
    return GemmWorkload(flops=2.0 * s.batch * s.m * s.n * s.k,
                        bytes=4.0 * s.batch * (s.m * s.k + s.k * s.n + s.m * s.n),
                        latency=aisp.LatencyCounts(launches=1),  # one batched cuBLAS kernel for all 40 products
                        items=s.batch, item_unit="GEMMs", precision="fp32", element_tol=2e-6,
                        ceiling_note="profiled (torch profiler, H200): one 9.7 us FFMA kernel (cuBLAS 32x32 tiles) in a 125 us window under the profiler: GPU busy 8%, host gaps 79 us a call",
                        requires=native.REQUIRES,
                        window="idle")


WORKLOAD = _gemm_workload()
LIBRARY = native.Library((HERE / "gemm_batched.cu",),
                         flags=("-DCH01_LIBRARY", *(find_cublas.cublas_flags() or ["-lcublas"])))
"""gemm_batched.cu as a shared library, linked with cuBLAS (the toolkit's or the nvidia-cublas wheel's)."""
INT, PTR = ctypes.c_int, ctypes.c_void_p


class LoopedGemm(aisp.Benchmark):
    """C[i] = A[i] @ B[i] for i < 40, one cuBLAS call per product."""

    workload = WORKLOAD
    inputs = ("a", "b")
    scratch = ("c",)

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        self.lib = LIBRARY.load(self.device)
        for fn in ("gemm_loop", "gemm_strided", "gemm_batched"):
            getattr(self.lib, fn).argtypes = [PTR, PTR, PTR, INT, INT, INT, INT, PTR]
        native.check(self.lib.gemm_init(), "cublasCreate")
        self.a = torch.randn(w.batch, w.m, w.k, device=self.device, generator=gen)
        self.b = torch.randn(w.batch, w.k, w.n, device=self.device, generator=gen)
        self.c = torch.empty(w.batch, w.m, w.n, device=self.device)
        self.prepare()
        self.check_against_torch()

    def prepare(self) -> None:
        """Anything a variant builds from the operands before the first call."""

    def check_against_torch(self) -> None:
        """The CUDA C++ result must match PyTorch's on this GPU before anything is timed."""
        got = self.run().clone()
        torch.testing.assert_close(got, torch.bmm(self.a, self.b), rtol=1e-4, atol=1e-4)

    def call(self) -> int:
        w = self.workload
        return self.lib.gemm_loop(self.a.data_ptr(), self.b.data_ptr(), self.c.data_ptr(),
                                  w.batch, w.m, w.n, w.k, native.stream(self.device))

    def run(self) -> torch.Tensor:
        native.check(self.call(), type(self).__name__)
        return self.c


def get_benchmark() -> aisp.Benchmark:
    return LoopedGemm()


if __name__ == "__main__":
    aisp.main(get_benchmark)
