"""Baseline fused RMSNorm: the eager RMSNorm module of a Llama-style model, one kernel per operator.

Baseline: ``(x.float() * rsqrt(x.float().pow(2).mean(-1) + eps)).type_as(x) * w`` on 32,768 rows of
4,096 bf16 (256 MiB in, 256 MiB out), as the reference Llama code writes it. Eager PyTorch runs
eight kernels (cast to fp32, square, mean, add eps, rsqrt, scale, cast back, weight) and each
writes an intermediate, most of them fp32, that the next one reads back: about 4.6 GB of HBM
traffic for the 0.54 GB a norm needs (read x once, write y once). 1 FLOP/byte: memory-bound.
Optimized (optimized_fused_rmsnorm.py): one Triton program per row (ch09_rows.py) keeps the row in
registers from the load to the store: 0.54 GB of traffic, the same roundings (fp32 math, the
normalized row rounded to bf16 before the weight multiplies it).
Expect (measured, H200, 2026-11-23): 8.6x [8.1, 9.1]: eager chain 1.69 ms (317 GB/s of needed
traffic), fused 0.197 ms (2.73 TB/s, 65% of the 4.2 TB/s HBM copy ceiling; floor 0.13 ms). CPU: not
run (Triton kernel).
Run: python ch09/baseline_fused_rmsnorm.py  |  aisp bench run -t ch09:fused_rmsnorm
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import aisp


@dataclass(frozen=True, kw_only=True)
class NormWorkload(aisp.Workload):
    rows: int = 32768
    dim: int = 4096
    eps: float = 1e-6


def _workload() -> NormWorkload:
    w = NormWorkload()
    # per element: square, sum, scale, weight (4 FLOPs); bytes: read x, write y (bf16) and w once
    return NormWorkload(flops=4.0 * w.rows * w.dim, bytes=2.0 * (2 * w.rows * w.dim + w.dim), items=w.rows,
                        item_unit="rows", precision="bf16",
                        requires=aisp.Requirements(cuda=True, packages=("triton",)))


WORKLOAD = _workload()


def rmsnorm_eager(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """The Llama reference RMSNorm: statistics in fp32, the normalized row cast back, then the weight."""
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return xf.type_as(x) * weight


class EagerRMSNorm(aisp.Benchmark):
    workload = WORKLOAD
    inputs = ("x",)

    def setup(self) -> None:
        w, gen, dev = self.workload, self.generator(), self.device
        self.x = torch.randn(w.rows, w.dim, generator=gen, device=dev).to(torch.bfloat16)
        self.weight = (1 + 0.1 * torch.randn(w.dim, generator=gen, device=dev)).to(torch.bfloat16)

    def run(self) -> torch.Tensor:
        return rmsnorm_eager(self.x, self.weight, self.workload.eps)


def get_benchmark() -> aisp.Benchmark:
    return EagerRMSNorm()


if __name__ == "__main__":
    aisp.main(get_benchmark)
