"""Shared by chapter 10's GEMM ladder (not a pair itself): the workload, the kernels, one benchmark class.

Every rung computes C = A @ B^T, A (8192 x 8192) and B (8192 x 8192, K-major like an nn.Linear
weight) in bf16, fp32 accumulation, C in bf16, through the same C entry point ``gemm_bf16`` of its
own ``.cu`` file (see ch10_gemm.cuh).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import torch

import aisp
from aisp.kits import native

HERE = Path(__file__).resolve().parent
PTR, INT = ctypes.c_void_p, ctypes.c_int
KERNELS = {
    "simt": "gemm_simt.cu",  # rung 1: FP32 FFMA, register-tiled
    "mma_sync": "gemm_mma_sync.cu",  # rung 2: warp-level mma.sync + cp.async ring
    "wgmma": "gemm_wgmma.cu",  # rung 3: warpgroup wgmma from swizzled shared memory, cp.async loads
    "tma": "gemm_tma.cu",  # rung 4: TMA loads into an mbarrier ring
    "ws": "gemm_ws.cu",  # rung 5: producer warpgroup + 2 consumer warpgroups, setmaxnreg
}
"""The ladder's kernels in order, by short name: the .cu file each is built from."""
HOPPER_ONLY = ("wgmma", "tma", "ws")
"""The rungs built for sm_90a (wgmma, TMA, setmaxnreg): they run on H100/H200 only."""


@dataclass(frozen=True, kw_only=True)
class GemmWorkload(aisp.Workload):
    m: int = 8192
    n: int = 8192
    k: int = 8192


def gemm_workload(*, hopper: bool, ceiling_note: str = "") -> GemmWorkload:
    """The ladder's 8192^3 bf16 GEMM: 1.1 TFLOP and 384 MiB of compulsory traffic per call.

    ``hopper``: the pair has an sm_90a rung (compute capability 9.0); else mma.sync's 8.0 suffices.
    ``ceiling_note``: the pair's reason for staying below 80% of its ceiling (README).
    """
    s = GemmWorkload()
    requires = aisp.Requirements(cuda=True, executables=("nvcc",),
                                 min_compute_capability=(9, 0) if hopper else (8, 0))
    return GemmWorkload(flops=2.0 * s.m * s.n * s.k, bytes=2.0 * (s.m * s.k + s.n * s.k + s.m * s.n),
                        items=1, item_unit="GEMMs", precision="bf16", requires=requires, ceiling_note=ceiling_note)


def library(kernel: str) -> native.Library:
    """The native library of one rung (``simt``, ``mma_sync``, ``wgmma``, ``tma``, ``ws``)."""
    return native.Library((HERE / KERNELS[kernel],), hopper_only=kernel in HOPPER_ONLY)


def load_gemm(kernel: str, device: torch.device) -> ctypes.CDLL:
    """One rung's library built for ``device`` and loaded, ``gemm_bf16`` typed."""
    lib = library(kernel).load(device)
    lib.gemm_bf16.argtypes = [PTR, PTR, PTR, INT, INT, INT, PTR]
    return lib


def run_gemm(lib: ctypes.CDLL, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """c = a @ b.T by the library's kernel, on the current stream; a RuntimeError on a failed launch."""
    (m, k), n = a.shape, b.shape[0]
    status = lib.gemm_bf16(PTR(a.data_ptr()), PTR(b.data_ptr()), PTR(c.data_ptr()), m, n, k,
                           native.stream(a.device))
    native.check(status, "gemm_bf16")
    return c


def check_against_torch(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    """c must be torch.matmul(a, b.T) up to bf16 rounding of the output: both round fp32 sums that
    differ only in summation order, so they differ by at most one bf16 ulp (< 1% relative)."""
    ref = torch.matmul(a, b.T).float()
    rms = float(ref.square().mean().sqrt())
    torch.testing.assert_close(c.float(), ref, rtol=1e-2, atol=1e-2 * rms, msg=lambda m: f"{what}: {m}")


class LadderGemm(aisp.Benchmark):
    """C = A @ B^T (bf16 in and out, fp32 accumulation) by one rung of the ladder."""

    kernel: ClassVar[str]
    """Which rung runs: a key of KERNELS."""
    inputs = ("a", "b")
    scratch = ("c",)

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        self.lib = load_gemm(self.kernel, self.device)
        self.a = torch.randn(w.m, w.k, device=self.device, dtype=torch.bfloat16, generator=gen)
        self.b = torch.randn(w.n, w.k, device=self.device, dtype=torch.bfloat16, generator=gen)
        self.c = torch.empty(w.m, w.n, device=self.device, dtype=torch.bfloat16)
        check_against_torch(self.run(), self.a, self.b, KERNELS[self.kernel])

    def run(self) -> torch.Tensor:
        return run_gemm(self.lib, self.a, self.b, self.c)
