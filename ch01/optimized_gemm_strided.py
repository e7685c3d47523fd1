"""Optimized GEMM, strided (CUDA C++): the 40 products in one cublasSgemmStridedBatched call.

Baseline (baseline_gemm.py): 40 cublasSgemm calls, 40 launches of under-filled grids.
Optimized: the matrices sit at fixed strides in one tensor, so ``cublasSgemmStridedBatched``
needs no pointer arrays: base pointers and strides, one launch for all 40 products. This is
what ``torch.bmm`` does with contiguous batches.
Expect: ~12x on an H200 (harness), ~40x back to back (binary), on a par with pointer arrays.
Run: python ch01/optimized_gemm_strided.py  |  aisp bench run -t ch01:gemm
"""

from __future__ import annotations

from baseline_gemm import LoopedGemm

import aisp
from aisp.kits import native


class StridedGemm(LoopedGemm):
    def call(self) -> int:
        w = self.workload
        return self.lib.gemm_strided(self.a.data_ptr(), self.b.data_ptr(), self.c.data_ptr(),
                                     w.batch, w.m, w.n, w.k, native.stream(self.device))


def get_benchmark() -> aisp.Benchmark:
    return StridedGemm()


if __name__ == "__main__":
    aisp.main(get_benchmark)
