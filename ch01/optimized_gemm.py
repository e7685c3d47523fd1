"""Optimized GEMM (CUDA C++): the 40 products in one cublasSgemmBatched call.

Baseline (baseline_gemm.py): 40 cublasSgemm calls, 40 launches of under-filled grids.
Optimized: device arrays of the 40 A, B and C pointers are built once in setup();
``cublasSgemmBatched`` then runs all 40 products in one launch whose grid fills the GPU.
Pointer arrays also batch products that do not sit at fixed strides in memory.
Expect: ~12x on an H200 (harness), ~36x back to back (binary).
Run: python ch01/optimized_gemm.py  |  aisp bench run -t ch01:gemm
"""

from __future__ import annotations

import torch
from baseline_gemm import LoopedGemm

import aisp
from aisp.kits import native


def pointers(t: torch.Tensor) -> torch.Tensor:
    """A device array holding the address of each matrix of a (batch, rows, cols) tensor."""
    step = t.stride(0) * t.element_size()
    return torch.tensor([t.data_ptr() + i * step for i in range(t.shape[0])], dtype=torch.int64,
                        device=t.device)


class BatchedGemm(LoopedGemm):
    def prepare(self) -> None:
        self.a_ptrs, self.b_ptrs, self.c_ptrs = pointers(self.a), pointers(self.b), pointers(self.c)

    def call(self) -> int:
        w = self.workload
        return self.lib.gemm_batched(self.a_ptrs.data_ptr(), self.b_ptrs.data_ptr(), self.c_ptrs.data_ptr(),
                                     w.batch, w.m, w.n, w.k, native.stream(self.device))


def get_benchmark() -> aisp.Benchmark:
    return BatchedGemm()


if __name__ == "__main__":
    aisp.main(get_benchmark)
