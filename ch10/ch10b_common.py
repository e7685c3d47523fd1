"""Small helpers shared by the cluster, cooperative and Triton pairs of chapter 10 (not a pair itself)."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

import torch

import aisp
from aisp.kits import native

HERE = Path(__file__).resolve().parent
PTR, INT, FLOAT = ctypes.c_void_p, ctypes.c_int, ctypes.c_float
HOPPER = aisp.Requirements(cuda=True, executables=("nvcc",), min_compute_capability=(9, 0))
"""CUDA C++ that uses Hopper's clusters (sm_90): a GPU of compute capability 9.0 and nvcc."""
TRITON_HOPPER = aisp.Requirements(cuda=True, packages=("triton",), min_compute_capability=(9, 0))
"""Triton kernels that use TMA tensor descriptors: a Hopper GPU and Triton."""


def library(source: str, *, hopper_only: bool | None = None) -> native.Library:
    """The chapter's ``source`` (a .cu file beside this one) as a native library."""
    return native.Library((HERE / source,), hopper_only=hopper_only)




@dataclass(frozen=True, kw_only=True)
class MatmulWorkload(aisp.Workload):
    m: int = 8192
    n: int = 8192
    k: int = 8192


def matmul_workload(m: int, n: int, k: int) -> MatmulWorkload:
    """C = A @ B in bf16 (fp32 accumulation) on a Hopper GPU with Triton: FLOPs and the fewest bytes."""
    return MatmulWorkload(m=m, n=n, k=k, flops=2.0 * m * n * k, bytes=2.0 * (m * k + k * n + m * n), items=1,
                          item_unit="GEMMs", precision="bf16", requires=TRITON_HOPPER)


class TritonMatmul(aisp.Benchmark):
    """C = A @ B with one of ch10b_triton's kernels (``kind``); the workload sets the shape."""

    inputs = ("a", "b")
    scratch = ("c",)
    kind = "pointers"
    """ch10b_triton.launch's kernel: "pointers", "descriptors" or "persistent"."""

    def setup(self) -> None:
        import ch10b_triton

        w, gen = self.workload, self.generator()
        self.triton = ch10b_triton
        self.programs = torch.cuda.get_device_properties(self.device).multi_processor_count
        self.a = torch.randn(w.m, w.k, generator=gen, device=self.device).bfloat16()
        self.b = torch.randn(w.k, w.n, generator=gen, device=self.device).bfloat16()
        self.c = torch.empty(w.m, w.n, device=self.device, dtype=torch.bfloat16)
        got, want = self.run().float(), (self.a @ self.b).float()
        error = float((got - want).norm() / want.norm())
        assert error < 1e-2, f"{type(self).__name__}: relative L2 error {error:.2e} against torch.matmul"

    def run(self) -> torch.Tensor:
        return self.triton.launch(self.kind, self.a, self.b, self.c, self.programs)
