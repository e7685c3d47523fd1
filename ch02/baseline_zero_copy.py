"""Baseline zero copy: copy a 256 MiB pinned host table to the GPU to use 1% of its rows.

Baseline: a table of 65,536 rows x 4 KiB sits in pinned host memory (a feature store, an
embedding table too large to keep on the GPU); a step needs 655 of its rows. The step copies the
whole table (``copy_(non_blocking=True)``, at the pinned PCIe rate) and gathers the rows on the
GPU (``index_select``): 256 MiB cross PCIe for 2.6 MiB used.
Optimized (optimized_zero_copy.py): a CUDA C++ kernel reads the 655 rows straight from the mapped
pinned memory (zero copy): only the bytes it touches cross PCIe.
Expect (measured, H200, 2026-11-23): 36.8x [32.1, 42.1] (4.95 -> 0.130 ms).
Run: python ch02/baseline_zero_copy.py  |  aisp bench run -t ch02:zero_copy
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import aisp
from aisp.kits import native


@dataclass(frozen=True, kw_only=True)
class GatherWorkload(aisp.Workload):
    rows: int = 65536
    row_floats: int = 1024
    used: int = 655
    """Rows a call reads (1% of the table)."""


WORKLOAD = GatherWorkload(
    bytes=655 * 1024 * 4.0, link="h2d", precision="exact", requires=native.REQUIRES,
    ceiling_note="ncu (H200): gather_rows_kernel 57 us, DRAM 0%: each warp waits on its mapped-host reads over "
                 "PCIe (long_scoreboard 1,411 an issue), round trip after round trip")


class CopyThenGather(aisp.Benchmark):
    """Whole table to the GPU, then a gather there."""

    workload = WORKLOAD
    inputs = ("table", "idx")
    scratch = ("staged",)

    def make_inputs(self) -> None:
        """The pinned table and the rows a call wants (both variants)."""
        w = self.workload
        gen = torch.Generator().manual_seed(self.seed)
        self.table = torch.randn(w.rows, w.row_floats, generator=gen).pin_memory()
        self.idx = torch.randperm(w.rows, generator=gen)[: w.used].to(self.device)

    def setup(self) -> None:
        self.make_inputs()
        self.staged = torch.empty(self.workload.rows, self.workload.row_floats, device=self.device)

    def run(self) -> torch.Tensor:
        self.staged.copy_(self.table, non_blocking=True)
        return torch.index_select(self.staged, 0, self.idx)


def get_benchmark() -> aisp.Benchmark:
    return CopyThenGather()


if __name__ == "__main__":
    aisp.main(get_benchmark)
