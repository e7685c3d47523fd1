"""Baseline matmul: an 8192^3 fp32 matrix product on the fp32 pipes (TF32 off, PyTorch's default).

Baseline: ``a @ b`` on fp32 tensors. With ``torch.backends.cuda.matmul.allow_tf32`` False (the
default) cuBLAS runs true fp32 FMA on the CUDA cores: ~51 TFLOP/s measured on our H200, 1.1 TFLOP
per call.
Optimized (optimized_matmul_pytorch.py): the same product from bf16 operands on the tensor cores
(~800 TFLOP/s measured; the weight ``b`` converted in setup(), the per-call activation ``a`` cast
inside run()), accumulating and writing fp32
(``torch.mm(..., out_dtype=torch.float32)``). TF32 variant (optimized_matmul_pytorch_tf32.py):
fp32 operands, TF32 tensor-core math (~360 TFLOP/s measured).
Expect: tf32 ~6x, bf16 ~14x on an H100/H200; both bound by tensor-core FLOPs (8192^3 has an
arithmetic intensity of ~1,400 FLOP/byte in bf16, far right of the ridge point). Measured on
our H200: fp32 21.85 ms (50 TFLOP/s), tf32 2.76 ms (399 TFLOP/s, 7.9x), bf16 1.51 ms
(730 TFLOP/s, 93% of the 783 TFLOP/s the harness measured as peak; 14.5x).
Tolerance: the lowest precision is bf16 operands (8 bits of mantissa, fp32 accumulation) over
K = 8192 products of unit-variance values: outputs ~N(0, 1) err by ~3e-3 rms, ~2e-2 at worst:
rtol 2e-2, element_tol 6e-3 (3e-2 absolute at max |out| ~5).
Run: python ch13/baseline_matmul_pytorch.py  |  aisp bench run -t ch13:matmul_pytorch
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import aisp


@dataclass(frozen=True, kw_only=True)
class MatmulWorkload(aisp.Workload):
    m: int = 8192
    n: int = 8192
    k: int = 8192


def _workload() -> MatmulWorkload:
    w = MatmulWorkload()
    return MatmulWorkload(flops=2.0 * w.m * w.n * w.k, bytes=4.0 * (w.m * w.k + w.k * w.n + w.m * w.n),
                          precision="bf16", rtol=2e-2, element_tol=6e-3, requires=aisp.Requirements(cuda=True))


WORKLOAD = _workload()


class FP32Matmul(aisp.Benchmark):
    """``a`` is the per-call activation (refilled before a checked call); ``b`` the weight, which a
    variant may convert once in setup()."""

    workload = WORKLOAD
    inputs = ("a",)

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        self.a = torch.randn(w.m, w.k, generator=gen, device=self.device)
        self.b = torch.randn(w.k, w.n, generator=gen, device=self.device) / w.k**0.5

    def run(self) -> torch.Tensor:
        return self.a @ self.b


def get_benchmark() -> aisp.Benchmark:
    return FP32Matmul()


if __name__ == "__main__":
    aisp.main(get_benchmark)
