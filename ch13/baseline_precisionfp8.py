"""Baseline fp8: a 16384^3 linear layer (activations x weights^T) in bf16 on the tensor cores.

Baseline: ``F.linear(x, w)`` with bf16 x (16384 tokens x 16384) and bf16 w (16384 x 16384):
one cuBLAS bf16 GEMM, 8.8 TFLOP, near the measured ~800 TFLOP/s bf16 ceiling of our H200.
Optimized (optimized_precisionfp8.py): the weight is quantized to fp8 e4m3 once (per-tensor
scale, at model load); each call measures the activation's amax, scales and casts it to e4m3
(one fused Triton pass, ~0.8 GB of traffic) and runs ``torch._scaled_mm``: Hopper's fp8 tensor
cores run at twice the bf16 rate and operands are half the bytes.
Expect: 1.6-1.8x on an H100/H200 (fp8 ceiling measured at 1,440 TFLOP/s; the quantization pass
costs a few percent). Measured on our H200: 12.76 -> 6.95 ms (1.84x); bf16 at 689 TFLOP/s,
fp8 at 1,266 TFLOP/s including the activation quantization (88% of the 1,433 measured peak;
the _scaled_mm alone took 5.92 ms).
Tolerance: e4m3 keeps 3 mantissa bits (relative rounding up to 2^-4). With x ~ N(0, 1) and
w ~ N(0, 1/K) the outputs are ~N(0, 1) and fp8 rounding of both operands adds ~0.04 rms error,
up to ~0.25 at the worst of 268M outputs (max |out| ~6): element_tol 0.08 (0.5 absolute), rtol 0
(a wrong scale or layout errs by O(1)).
metrics() reports both variants' errors against an fp32 reference of the same product.
Run: python ch13/baseline_precisionfp8.py  |  aisp bench run -t ch13:precisionfp8
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

import aisp


@dataclass(frozen=True, kw_only=True)
class LinearWorkload(aisp.Workload):
    tokens: int = 16384
    d_in: int = 16384
    d_out: int = 16384


def linear_workload(**kw: object) -> LinearWorkload:
    w = LinearWorkload(**{k: v for k, v in kw.items() if k in ("tokens", "d_in", "d_out")})
    flops = 2.0 * w.tokens * w.d_in * w.d_out
    io = 2.0 * (w.tokens * w.d_in + w.d_in * w.d_out + w.tokens * w.d_out)
    return LinearWorkload(**kw, flops=flops, bytes=io, items=w.tokens, item_unit="tokens")


WORKLOAD = linear_workload(precision="fp8", element_tol=0.08, rtol=0.0,
                           requires=aisp.Requirements(cuda=True, min_compute_capability=(8, 9),
                                                      packages=("triton",)))


def error_metrics(out: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> dict[str, float]:
    """Max abs and relative L2 error of ``out`` against an fp32 (TF32 off) x @ w^T."""
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        ref = x.float() @ w.float().t()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    diff = out.float() - ref
    return {"max_abs_err_vs_fp32": float(diff.abs().max()),
            "rel_l2_err_vs_fp32": float(diff.norm() / ref.norm())}


class BF16Linear(aisp.Benchmark):
    workload = WORKLOAD
    inputs = ("x",)

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        self.x = torch.randn(w.tokens, w.d_in, generator=gen, device=self.device).bfloat16()
        self.w = (torch.randn(w.d_out, w.d_in, generator=gen, device=self.device) / w.d_in**0.5).bfloat16()

    def run(self) -> torch.Tensor:
        return F.linear(self.x, self.w)

    def metrics(self) -> dict[str, float]:
        return error_metrics(self.run(), self.x, self.w)


def get_benchmark() -> aisp.Benchmark:
    return BF16Linear()


if __name__ == "__main__":
    aisp.main(get_benchmark)
