"""Baseline grouped GEMM: a Python loop of 64 uneven bf16 GEMMs (an MoE layer's expert loop).

Baseline: tokens sorted by expert, expert g owns a contiguous band of 40 to 488 rows of ``a``
(16,984 rows in all); for each expert ``torch.mm(a[band], b[g], out=out[band])`` with
K = N = 2,048. That is how a competent first version of an MoE layer looks. Each product is too
small to fill 132 SMs (a 256-row band is 2 x 16 tiles of 128 x 128) and the loop pays 64
launches, so the GPU runs one half-empty wave per expert.
Optimized (optimized_triton_grouped_gemm.py): one persistent Triton kernel, one program per SM,
walking the 2,608 tiles of all experts: every SM stays busy across expert boundaries.
Same FLOPs (142 GFLOP) and bytes (512 MiB of expert weights, 66 MiB of activations in, 66 out).
Expect: H200, measured: 3.07x [2.87, 3.29], 1.128 -> 0.370 ms: the mm loop at 126 TFLOP/s,
the grouped kernel at 385 TFLOP/s (49% of the 783 TFLOP/s bf16 ceiling).
CPU: not run (Triton kernel).
Tolerance: bf16 default: both accumulate in fp32 and round the output once to bf16.
Run: python ch14/baseline_triton_grouped_gemm.py  |  aisp bench run -t ch14:triton_grouped_gemm
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import aisp


@dataclass(frozen=True, kw_only=True)
class GroupedWorkload(aisp.Workload):
    groups: int = 64
    k: int = 2048
    n: int = 2048
    min_rows: int = 40
    """Rows of expert g: min_rows + (37 * g mod 57) * 8, so bands are uneven and rarely tile-aligned."""


def group_rows(w: GroupedWorkload) -> list[int]:
    """Rows per group: fixed by the workload (the same in every seed and variant)."""
    return [w.min_rows + (37 * g % 57) * 8 for g in range(w.groups)]


def grouped_workload(**kw: int) -> GroupedWorkload:
    w = GroupedWorkload(**kw)
    rows = sum(group_rows(w))
    flops = 2.0 * rows * w.k * w.n
    io = 2.0 * (rows * w.k + w.groups * w.k * w.n + rows * w.n)
    return GroupedWorkload(**kw, flops=flops, bytes=io, items=rows, item_unit="tokens", precision="bf16",
                           requires=aisp.Requirements(cuda=True, packages=("triton",)))


WORKLOAD = grouped_workload(
    ceiling_note="TMA kernels ~70%: _tma 18.6% padded rows; _tma_split 9.4%, its tile loop unflattened; the pointer kernel (55%): L2 at 80%, tensor pipe 59% (Nsight Compute)")


class LoopedGroupGemm(aisp.Benchmark):
    workload = WORKLOAD
    inputs = ("a",)
    scratch = ("out",)

    def setup(self) -> None:
        w, gen, dev = self.workload, self.generator(), self.device
        self.rows = group_rows(w)
        total = sum(self.rows)
        self.a = torch.randn(total, w.k, generator=gen, device=dev).to(torch.bfloat16)
        self.b = (torch.randn(w.groups, w.k, w.n, generator=gen, device=dev) / w.k**0.5).to(torch.bfloat16)
        self.out = torch.empty(total, w.n, device=dev, dtype=torch.bfloat16)

    def run(self) -> torch.Tensor:
        start = 0
        for g, rows in enumerate(self.rows):
            torch.mm(self.a[start:start + rows], self.b[g], out=self.out[start:start + rows])
            start += rows
        return self.out


def get_benchmark() -> aisp.Benchmark:
    return LoopedGroupGemm()


if __name__ == "__main__":
    aisp.main(get_benchmark)
