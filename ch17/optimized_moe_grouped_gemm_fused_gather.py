"""Optimized MoE grouped GEMM, fused gather: _fused_swiglu with the row gather inside the up GEMM and the sort on the device.

Baseline (baseline_moe_grouped_gemm.py): per expert a mask, ``nonzero()`` (a host sync), a gather, two
GEMMs and an ``index_add_``.
Optimized: optimized_moe_grouped_gemm_fused_swiglu.py (measured 3.051 ms, 69% of the bf16 peak; its kernels
by the profile of gather_combine: the grouped GEMMs, the row gather ``x[order // top_k]`` ~0.26 ms, the
combine ~0.14 ms, the routing) with two changes. The gather: ``aisp.kits.moe_gather.gather_swiglu`` is
_fused_swiglu's up GEMM (persistent Triton, device schedule, SwiGLU epilogue) whose x tile is read by row
from the unsorted tokens: a block's 128 rows are the tokens ``order[r] // top_k`` of its sorted
assignments, loaded by 16-byte cp.async into shared memory (TMA cannot gather rows on sm_90; the weights
stay on TMA; 240 registers, no spills at sm_90), so the (131,072, 2,048) gathered copy (537 MB written,
537 MB read back) is never made. The routing: ``aisp.kits.moe_schedule.device_route`` (ch19's two-kernel
stable counting sort, argsort's order exactly; 256 assignments a program) writes the order and the tile
schedule in place of the stable ``argsort``, the ``index_add_`` count, the schedule's ~10 torch ops and
the offsets' cumsum; the down ``_grouped_mm`` reads its offsets from the schedule. The down GEMM and the combine are unchanged.
Variant ``_fused_gather_torch_sort``: the same with _fused_swiglu's torch sort (the sort's ablation).
Expect: measured, H200, 2026-11-29 (two runs): 2.8848 and 2.8758 ms, ~573-575 TFLOP/s, 73.2% and 73.4%
of the bf16 peak, 5.40x [4.86, 6.00] and 5.26x [4.52, 6.12] over the baseline, the pair's best until
_fused_route (2.786-2.794 ms, 3.6-4.1% faster); in its two runs _fused_swiglu read 3.0737 / 3.1205 ms and
the torch-sort variant 2.952 / 2.9592. Estimated before (arithmetic): ~2.7-2.8 ms, 75-79%: 3.051 - 0.26
(the gather) - 0.03-0.06 (routing ops, graph nodes) + 0-0.08 (x by cp.async instead of TMA); it came in
0.08-0.18 ms above that.
Run: python ch17/optimized_moe_grouped_gemm_fused_gather.py  |  aisp bench run -t ch17:moe_grouped_gemm
"""

from __future__ import annotations

import torch
from optimized_moe_grouped_gemm_gather_combine import GatherCombine
from optimized_moe_grouped_gemm_graph import INTERPRET, GraphedExperts

import aisp
from aisp.kits.moe import route
from aisp.kits.moe_schedule import device_route


class FusedGather(GraphedExperts):
    def forward(self) -> torch.Tensor:
        if not (self.x.is_cuda or INTERPRET):
            return GatherCombine.run(self)  # gather_combine's arithmetic, in torch (CPU tests)
        from aisp.kits.moe_gather import BK, BM, BN, gather_swiglu  # Triton, imported where it runs

        w = self.workload
        tile = (BM, BN, BK) if self.x.is_cuda else (16, 16, 16)  # the interpreter: the CPU tests' small shapes
        ids, gates = route(self.x, self.w_router, w.top_k)
        order, sched = self.sort(ids, gates, tile[0])
        h = gather_swiglu(self.x, order, w.top_k, self.w_gate_up, sched, tile)
        y = torch._grouped_mm(h, self.w_down, offs=sched[0, 1:])  # each expert's end row, on the device
        return self.combine(y, order.long(), gates)  # gather_combine's Triton gather (on a CPU its scatter)

    def sort(self, ids: torch.Tensor, gates: torch.Tensor, bm: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(int32 flat assignments sorted by expert, stable; the schedule of ``bm``-row blocks), on the device:
        device_route's counting sort at 256 assignments a program (at its default 1,024 with 64 experts the
        sort kernel spills 4.4 KB a thread at sm_90; at 256, 288 bytes)."""
        order, _, sched = device_route(ids.reshape(-1), gates.reshape(-1), self.workload.experts, bm, chunk=256)
        return order, sched


def get_benchmark() -> aisp.Benchmark:
    return FusedGather()


if __name__ == "__main__":
    aisp.main(get_benchmark)
