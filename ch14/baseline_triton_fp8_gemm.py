"""Baseline fp8 GEMM: a 16384 x 16384 x 8192 linear layer in bf16 on the tensor cores.

Baseline: ``x @ w.T`` with bf16 activations x (16,384 x 8,192) and weights w (16,384 x 8,192):
one cuBLAS bf16 GEMM, 4.4 TFLOP, near the ~783 TFLOP/s bf16 ceiling measured on our H200.
Optimized (optimized_triton_fp8_gemm.py): the weight is quantized to e4m3 once (one scale per
output row, at model load); each call quantizes x (one scale per row) in one Triton pass and
runs a Triton e4m3 GEMM that applies both scales in its epilogue: Hopper's fp8 tensor cores run
at twice the bf16 rate and the operands are half the bytes.
Expect: H200, measured: 1.80x [1.75, 1.85], 6.21 -> 3.42 ms: cuBLAS bf16 at 708 TFLOP/s (90% of
783), the fp8 path at 1,286 TFLOP/s with its quantization pass (90% of ~1,433).
CPU: not run (fp8 tensor cores). Needs compute capability 9.0:
the tiles want 147 KiB of shared memory (Ada's fp8 GPUs have 99 KiB per block).
Tolerance: e4m3 keeps 3 mantissa bits. With x ~ N(0, 1) and w ~ N(0, 1/K) the outputs are
~N(0, 1); emulating the quantization on a CPU (512 x 512 x 8192, exact accumulation) measured
a relative L2 error of 0.037 and a max abs error of 0.18 (mean 0.03); over 268M outputs, and
with Hopper's fp8 accumulation, the worst element reaches ~0.3: element_tol 0.08 (0.5 at max |out| ~6), rtol 0, relative L2
0.1 (a wrong scale or layout errs by O(1)).
Run: python ch14/baseline_triton_fp8_gemm.py  |  aisp bench run -t ch14:triton_fp8_gemm
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import aisp


@dataclass(frozen=True, kw_only=True)
class Fp8Workload(aisp.Workload):
    m: int = 16384
    n: int = 16384
    k: int = 8192


def fp8_workload(**kw: int) -> Fp8Workload:
    w = Fp8Workload(**kw)
    io = 2.0 * (w.m * w.k + w.n * w.k + w.m * w.n)
    return Fp8Workload(**kw, flops=2.0 * w.m * w.n * w.k, bytes=io, items=w.m, item_unit="tokens",
                       precision="fp8", element_tol=0.08, rtol=0.0, max_rel_l2=0.1,
                       requires=aisp.Requirements(cuda=True, min_compute_capability=(9, 0),
                                                  packages=("triton",)))


WORKLOAD = fp8_workload()


class Bf16Linear(aisp.Benchmark):
    workload = WORKLOAD
    inputs = ("x",)

    def setup(self) -> None:
        w, gen, dev = self.workload, self.generator(), self.device
        self.x = torch.randn(w.m, w.k, generator=gen, device=dev).to(torch.bfloat16)
        self.weight = (torch.randn(w.n, w.k, generator=gen, device=dev) / w.k**0.5).to(torch.bfloat16)

    def run(self) -> torch.Tensor:
        return self.x @ self.weight.t()


def get_benchmark() -> aisp.Benchmark:
    return Bf16Linear()


if __name__ == "__main__":
    aisp.main(get_benchmark)
