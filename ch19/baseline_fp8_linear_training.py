"""Baseline fp8 training: one Linear layer's forward and backward in bf16 (8192 x 8192 x 8192).

Baseline: ``y = F.linear(x, w)`` and ``torch.autograd.grad(y, (x, w), g)``: three bf16 cuBLAS GEMMs
(forward, grad_x = g w, grad_w = g^T x), 3 x 1.1 TFLOP, bound by the bf16 tensor-core rate
(783 TFLOP/s measured on our H200).
Optimized (optimized_fp8_linear_training.py): the same three products on the fp8 tensor cores
(``torch._scaled_mm``, 1,433 TFLOP/s measured): x and w cast to e4m3, g to e5m2, each with a dynamic
per-tensor scale, each cast writing both layouts in one Triton pass.
Expect (measured, H200, 2026-11-27): baseline 4.365 ms (755.7 TFLOP/s, 97% of bf16's 783); optimized
2.952 ms, 1.49x [1.42, 1.56], 1,117 TFLOP/s counting the casts (78% of the 1,433 TFLOP/s fp8 peak).
First run: 4.33 -> 2.89 ms, 1.50x, 1,141 TFLOP/s (80%).
Tolerance: inputs are scaled (x, g ~ N(0, M^-1/2), w ~ N(0, M^1/2 / K)) so all three outputs have
rms 1. e4m3 rounds each operand to 3 mantissa bits and e5m2 to 2 (relative error up to 2^-4 and
2^-3), and the dot products inherit it: measured on a CPU at 1024^3, rel L2 error 0.037 (y) and
0.059 (grads), max abs 0.30 over 1M outputs; over 67M outputs expect ~5.7 sigma = 0.35. Declared:
element_tol 0.1 (0.6 absolute at max |out| ~6), rtol 0, rel L2 0.1. A wrong scale or layout errs by O(1).
Run: python ch19/baseline_fp8_linear_training.py  |  aisp bench run -t ch19:fp8_linear_training
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

import aisp


@dataclass(frozen=True, kw_only=True)
class LinearStepWorkload(aisp.Workload):
    tokens: int = 8192
    d_in: int = 8192
    d_out: int = 8192


def linear_step_workload(**kw: object) -> LinearStepWorkload:
    """FLOPs of three GEMMs; bytes: read x, w, g and write y, grad_x, grad_w once in bf16."""
    w = LinearStepWorkload(**{k: v for k, v in kw.items() if k in ("tokens", "d_in", "d_out")})
    flops = 3 * 2.0 * w.tokens * w.d_in * w.d_out
    elems = w.tokens * w.d_in + w.d_out * w.d_in + w.tokens * w.d_out
    return LinearStepWorkload(**kw, flops=flops, bytes=2 * 2.0 * elems, items=w.tokens, item_unit="tokens")


WORKLOAD = linear_step_workload(precision="fp8", element_tol=0.1, rtol=0.0, max_rel_l2=0.1,
                                requires=aisp.Requirements(cuda=True, min_compute_capability=(8, 9),
                                                           packages=("triton",)))


class LinearStep(aisp.Benchmark):
    """Forward and backward of ``y = x w^T`` for a given upstream gradient ``g``."""

    workload: LinearStepWorkload = WORKLOAD
    inputs = ("x", "g")

    def setup(self) -> None:
        w, gen, dev = self.workload, self.generator(), self.device
        spread = w.tokens ** -0.25
        self.x = (torch.randn(w.tokens, w.d_in, generator=gen, device=dev) * spread).bfloat16().requires_grad_()
        self.w = (torch.randn(w.d_out, w.d_in, generator=gen, device=dev) / (spread * w.d_in ** 0.5)
                  ).bfloat16().requires_grad_()
        self.g = (torch.randn(w.tokens, w.d_out, generator=gen, device=dev) * spread).bfloat16()
        self.prepare()

    def prepare(self) -> None:
        """Untimed hook: build scalers, warm kernels."""

    def linear(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return F.linear(x, w)

    def run(self) -> tuple[torch.Tensor, ...]:
        y = self.linear(self.x, self.w)
        grad_x, grad_w = torch.autograd.grad(y, (self.x, self.w), self.g)
        return y.detach(), grad_x, grad_w


def get_benchmark() -> aisp.Benchmark:
    return LinearStep()


if __name__ == "__main__":
    aisp.main(get_benchmark)
