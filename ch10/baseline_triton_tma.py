"""Baseline Triton TMA: a bf16 Triton matmul whose tiles are loaded through pointer arithmetic.

Baseline: C = A @ B, 8,192 x 8,192 x 8,192 bf16 with fp32 accumulation (1.1 TFLOP per call),
``matmul_pointers`` in ch10b_triton.py: one program per 128 x 256 C tile (grouped order), 3
stages, 8 warps. Each K step builds a 128 x 64 and a 64 x 256 tensor of addresses; Triton lowers
the loads to ``cp.async`` (every thread issues 16-byte copies for its share of the tile) and
spends registers and issue slots on the address arithmetic.
Optimized (optimized_triton_tma.py): the same kernel with host-side ``TensorDescriptor``s; each
tile arrives through one TMA copy (``cp.async.bulk.tensor``) that a single thread issues, tracked
by an mbarrier, and the C tile leaves through a TMA store.
Expect (measured, H200, 2026-11-23): 1.60 ms per call, 689 TFLOP/s (88% of the 783 TFLOP/s bf16
peak).
Run: python ch10/baseline_triton_tma.py  |  aisp bench run -t ch10:triton_tma
"""

from __future__ import annotations

from ch10b_common import TritonMatmul, matmul_workload

import aisp

WORKLOAD = matmul_workload(8192, 8192, 8192)


class PointerMatmul(TritonMatmul):
    workload = WORKLOAD
    kind = "pointers"


def get_benchmark() -> aisp.Benchmark:
    return PointerMatmul()


if __name__ == "__main__":
    aisp.main(get_benchmark)
