"""Optimized fused LayerNorm: residual add, LayerNorm and GELU in one Triton kernel.

Baseline (baseline_triton_fused_layernorm.py): three eager kernels, 7 tensor passes over HBM.
Optimized: one program per row (4,096 bf16 = 8 KiB, held in registers by 8 warps): load x and
residual, add, compute mean and variance with two in-register reductions, normalize, scale,
shift and apply tanh-GELU (as ``y * sigmoid(2u)``, the same function), store once. HBM sees
only the 3 needed passes (read x, read residual, write the output): 768 MiB per call.
Expect: measured on an H200 (re-run; in the first run Triton rejected SQRT_2_OVER_PI, a plain
float global): 0.542 -> 0.239 ms, 2.27x [2.15, 2.39]; 3,366 GB/s, 80% of the ~4.2 TB/s HBM copy.
Run: python ch14/optimized_triton_fused_layernorm.py  |  aisp bench run -t ch14:triton_fused_layernorm
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from baseline_triton_fused_layernorm import EagerAddNormGelu

import aisp

SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)  # a jitted kernel reads only constexpr globals


@triton.jit
def _add_norm_gelu(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, dim, eps, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * dim
    cols = tl.arange(0, BLOCK)
    inside = cols < dim
    x = tl.load(x_ptr + offs + cols, mask=inside, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + offs + cols, mask=inside, other=0.0).to(tl.float32)
    h = (x + r).to(tl.bfloat16).to(tl.float32)  # eager stores the sum in bf16
    mean = tl.sum(h, axis=0) / dim
    centered = tl.where(inside, h - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(centered * centered, axis=0) / dim + eps)
    w = tl.load(w_ptr + cols, mask=inside, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=inside, other=0.0).to(tl.float32)
    y = (centered * rstd * w + b).to(tl.bfloat16).to(tl.float32)  # eager's LayerNorm output
    u = SQRT_2_OVER_PI * (y + 0.044715 * y * y * y)
    tl.store(y_ptr + offs + cols, (y * tl.sigmoid(2.0 * u)).to(tl.bfloat16), mask=inside)


def add_norm_gelu(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                  eps: float) -> torch.Tensor:
    """gelu_tanh(layer_norm(x + residual)) over the last dimension of 2-D contiguous tensors."""
    rows, dim = x.shape
    out = torch.empty_like(x)
    block = triton.next_power_of_2(dim)
    _add_norm_gelu[(rows,)](x, residual, weight, bias, out, dim, eps, BLOCK=block,
                            num_warps=max(1, min(16, block // 512)))
    return out


class TritonAddNormGelu(EagerAddNormGelu):
    def run(self) -> torch.Tensor:
        return add_norm_gelu(self.x, self.residual, self.weight, self.bias, self.workload.eps)


def get_benchmark() -> aisp.Benchmark:
    return TritonAddNormGelu()


if __name__ == "__main__":
    aisp.main(get_benchmark)
