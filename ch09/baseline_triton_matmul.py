"""Baseline Triton matmul: small tiles, no software pipelining, row-major launch order.

Baseline: C = A @ B, 8,192^3 bf16 (1.1 TFLOP) with ``matmul_kernel`` (ch09_matmul.py) launched with
64 x 64 x 32 tiles, 4 warps, ``num_stages=1`` (each tl.dot waits for its own loads: no copy of the
next slab overlaps the math) and ``group_m=1`` (programs walk C row by row, so consecutive
programs share one A row-panel but each needs a different B column-panel). Small tiles give each
loaded byte only 32 FLOPs (64 x 64 x 2 / (2 x 2 x 64) per k): tensor cores starve on bandwidth.
Optimized (optimized_triton_matmul.py): the same kernel with 128 x 256 x 64 tiles, 8 warps,
3 stages and group_m=8: 85 FLOPs per loaded byte, loads in flight under the math, and blocks of 8
tile-rows that re-use B panels in L2.
Same kernel, same fp32 accumulation; only the K-slab order of the sums differs (bf16 tolerance).
Expect (measured, H200, 2026-11-23): 2.8x [2.77, 2.85]: 64x64x32 one-stage tiles 4.58 ms (240
TFLOP/s), 128x256x64 three-stage grouped 1.63 ms (674 TFLOP/s, 86% of the 783 TFLOP/s bf16 tensor-
core rate). CPU: not run (Triton on CUDA; its CPU test uses the Triton interpreter).
Run: python ch09/baseline_triton_matmul.py  |  aisp bench run -t ch09:triton_matmul
"""

from __future__ import annotations

from typing import Any

import torch
from baseline_register_tiling import GemmWorkload, gemm_workload

import aisp

WORKLOAD = gemm_workload(GemmWorkload(m=8192, n=8192, k=8192), 2, "bf16",
                         requires=aisp.Requirements(cuda=True, packages=("triton",)))
TILING = {"bm": 64, "bn": 64, "bk": 32, "group_m": 1, "warps": 4, "stages": 1}


class TritonMatmul(aisp.Benchmark):
    """C = A @ B with ch09_matmul's kernel under ``tiling`` (a ch09_matmul.Tiling's fields)."""

    workload = WORKLOAD
    inputs = ("a", "b")
    scratch = ("c", "parts")
    tiling: dict[str, Any] = TILING

    def setup(self) -> None:
        import ch09_matmul

        w, gen, dev = self.workload, self.generator(), self.device
        self.mm, self.config = ch09_matmul, ch09_matmul.Tiling(**self.tiling)
        self.a = torch.randn(w.m, w.k, generator=gen, device=dev).to(torch.bfloat16)
        self.b = torch.randn(w.k, w.n, generator=gen, device=dev).to(torch.bfloat16)
        self.c = torch.empty(w.m, w.n, device=dev, dtype=torch.bfloat16)
        self.parts = ch09_matmul.partials(self.a, self.b, self.config)
        got, want = self.run().float(), self.a.float() @ self.b.float()
        error = float((got - want).norm() / want.norm())
        assert error < 1e-2, f"{type(self).__name__}: relative L2 error {error:.2e} against torch.matmul"

    def run(self) -> torch.Tensor:
        return self.mm.matmul(self.a, self.b, self.c, self.config, self.parts)


def get_benchmark() -> aisp.Benchmark:
    return TritonMatmul()


if __name__ == "__main__":
    aisp.main(get_benchmark)
