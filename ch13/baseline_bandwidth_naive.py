"""Baseline bandwidth: transposing a 16384 x 16384 fp32 matrix with strided (uncoalesced) reads.

Baseline: ``x.t().contiguous()``. PyTorch's generic copy kernel walks the output in order, so
consecutive threads of a warp read input elements 64 KB apart (one row apart): every 4-byte
read pulls its own 32-byte sector, and the sectors of a row are reused only if they survive
in L2 until the neighbouring columns come by. Useful traffic is 2 x 1 GiB; DRAM sees more.
Optimized (optimized_bandwidth_naive.py): a tiled Triton transpose: each program loads a
64 x 64 tile with coalesced row reads, transposes it on chip (shared memory / registers) and
stores it with coalesced row writes, so every sector moved is fully used.
Expect: 1.5-3x on an H100/H200, the tiled kernel near the ~4.2 TB/s measured copy rate.
Measured on our H200: 1.87 -> 0.56 ms (3.33x): 1.15 -> 3.82 TB/s, 91% of the copy ceiling.
Tolerance: a transpose moves bits; results must be identical (rtol 0, element_tol 0).
Run: python ch13/baseline_bandwidth_naive.py  |  aisp bench run -t ch13:bandwidth_naive
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import aisp


@dataclass(frozen=True, kw_only=True)
class TransposeWorkload(aisp.Workload):
    rows: int = 16384
    cols: int = 16384


def _workload() -> TransposeWorkload:
    w = TransposeWorkload()
    return TransposeWorkload(bytes=2.0 * 4 * w.rows * w.cols, items=w.rows * w.cols, item_unit="elements",
                             precision="fp32", rtol=0.0, element_tol=0.0,
                             requires=aisp.Requirements(cuda=True, packages=("triton",)))


WORKLOAD = _workload()


class StridedTranspose(aisp.Benchmark):
    workload = WORKLOAD
    inputs = ("x",)

    def setup(self) -> None:
        w = self.workload
        self.x = torch.randn(w.rows, w.cols, generator=self.generator(), device=self.device)

    def run(self) -> torch.Tensor:
        return self.x.t().contiguous()


def get_benchmark() -> aisp.Benchmark:
    return StridedTranspose()


if __name__ == "__main__":
    aisp.main(get_benchmark)
