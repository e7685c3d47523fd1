"""Code chapter 6's CUDA C++ pairs share (not a pair itself): the vector-add workload and its
setup, and ctypes signatures."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

import torch

import aisp
from aisp.kits import native

HERE = Path(__file__).resolve().parent
PTR, INT, LONG, FLOAT = ctypes.c_void_p, ctypes.c_int, ctypes.c_long, ctypes.c_float


@dataclass(frozen=True, kw_only=True)
class VectorWorkload(aisp.Workload):
    n: int = 1 << 25
    """Elements per vector: 32M floats, 128 MiB each; a + b -> c moves 384 MiB per call."""


def vector_workload(n: int = VectorWorkload().n) -> VectorWorkload:
    return VectorWorkload(n=n, flops=float(n), bytes=12.0 * n, items=n, item_unit="elements",
                          precision="exact", requires=native.REQUIRES)


VECTOR = vector_workload()
BIG_VECTOR = vector_workload(1 << 27)
"""128M floats (512 MiB per vector, 1.5 GiB a call): a call long enough (~0.5 ms) that the launch
and the last wave's tail (~5 us) stop costing a visible share of the HBM rate."""
VECTOR_LIBRARY = native.Library((HERE / "vector_add.cu",))



class VectorAdd(aisp.Benchmark):
    """c = a + b on the GPU through one of vector_add.cu's launches (``launch``)."""

    workload = VECTOR
    inputs = ("a", "b")
    scratch = ("c",)

    def setup(self) -> None:
        gen, n = self.generator(), self.workload.n
        self.lib = VECTOR_LIBRARY.load(self.device, {
            "add_one_block_run": [PTR, PTR, PTR, LONG, PTR],
            "add_grid_stride_run": [PTR, PTR, PTR, LONG, INT, PTR],
            "add_per_element_run": [PTR, PTR, PTR, LONG, INT, PTR],
            "add_blocked4_run": [PTR, PTR, PTR, LONG, PTR]})
        self.lib.grid_stride_blocks.restype = ctypes.c_int
        self.a = torch.randn(n, device=self.device, generator=gen)
        self.b = torch.randn(n, device=self.device, generator=gen)
        self.c = torch.empty_like(self.a)
        self.prepare()
        torch.testing.assert_close(self.run(), self.a + self.b, rtol=0, atol=0)

    def prepare(self) -> None:
        """What a variant looks up before its first launch (grid sizes)."""

    def launch(self) -> int:
        raise NotImplementedError

    def run(self) -> torch.Tensor:
        native.check(self.launch(), type(self).__name__)
        return self.c

    def pointers(self) -> tuple[int, int, int, int]:
        return self.a.data_ptr(), self.b.data_ptr(), self.c.data_ptr(), self.workload.n
