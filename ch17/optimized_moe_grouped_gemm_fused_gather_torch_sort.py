"""Optimized MoE grouped GEMM, fused gather with torch's sort: _fused_gather routed as _fused_swiglu routes.

Baseline (baseline_moe_grouped_gemm.py): per expert a mask, ``nonzero()`` (a host sync), a gather, two
GEMMs and an ``index_add_``.
Optimized: optimized_moe_grouped_gemm_fused_gather.py (the row gather inside the Triton up GEMM's x load)
with _fused_swiglu's routing in place of ``device_route``: the stable ``argsort`` of the 131,072
assignments, an ``index_add_`` of ones for the counts and ``schedule(counts)`` (torch ops, no host sync).
The ablation of the sort alone: ``device_route`` was measured by ch19 at 8 experts, not at this pair's 64,
where each of its programs scans a (256, 64) one-hot table; if it is slower than torch's radix sort, this
variant is the faster of the two.
Expect: measured, H200, 2026-11-29 (two runs): 2.952 and 2.9592 ms, 71.5% and 71.3% of the bf16 peak,
5.25x [4.71, 5.85] and 5.13x [4.40, 5.97]; _fused_gather (device sort) read 2.8848 / 2.8758 ms in the
same runs: torch's sort costs ~0.07-0.08 ms more. Estimated before (arithmetic): _fused_gather + 0-0.05
ms (argsort, the count and ~12 small ops, ~1.2 us a graph node), 74-78%.
Run: python ch17/optimized_moe_grouped_gemm_fused_gather_torch_sort.py  |  aisp bench run -t ch17:moe_grouped_gemm
"""

from __future__ import annotations

import torch
from optimized_moe_grouped_gemm_fused_gather import FusedGather

import aisp
from aisp.kits.moe import sort_by_expert
from aisp.kits.moe_schedule import schedule


class FusedGatherTorchSort(FusedGather):
    def sort(self, ids: torch.Tensor, gates: torch.Tensor, bm: int) -> tuple[torch.Tensor, torch.Tensor]:
        order, counts = sort_by_expert(ids, self.workload.experts, count_on_device=True)
        return order.to(torch.int32), schedule(counts, bm)


def get_benchmark() -> aisp.Benchmark:
    return FusedGatherTorchSort()


if __name__ == "__main__":
    aisp.main(get_benchmark)
