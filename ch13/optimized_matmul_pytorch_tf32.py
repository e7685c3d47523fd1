"""Optimized matmul, TF32: the same fp32 tensors, multiplied with TF32 tensor-core math.

Baseline (baseline_matmul_pytorch.py): fp32 GEMM on the CUDA cores.
Optimized (this variant): ``torch.backends.cuda.matmul.allow_tf32 = True`` for the duration of
the call (restored afterwards, so nothing else in the process changes): cuBLAS rounds the
operands' mantissas to 10 bits inside the tensor cores and accumulates in fp32. No data
conversion, fp32 in and out, ~7x the fp32 peak.
Expect: ~6x on an H100/H200 (measured TF32 ceiling ~360 TFLOP/s). Measured on our H200:
7.9x, 399 TFLOP/s.
Run: python ch13/optimized_matmul_pytorch_tf32.py  |  aisp bench run -t ch13:matmul_pytorch
"""

from __future__ import annotations

import torch
from baseline_matmul_pytorch import FP32Matmul

import aisp


class TF32Matmul(FP32Matmul):
    def run(self) -> torch.Tensor:
        previous = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return self.a @ self.b
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous


def get_benchmark() -> aisp.Benchmark:
    return TF32Matmul()


if __name__ == "__main__":
    aisp.main(get_benchmark)
