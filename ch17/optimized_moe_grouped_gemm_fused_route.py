"""Optimized MoE grouped GEMM, fused route: _fused_gather with the routing after the router GEMM in three kernels.

Baseline (baseline_moe_grouped_gemm.py): per expert a mask, ``nonzero()`` (a host sync), a gather, two
GEMMs and an ``index_add_``.
Optimized: optimized_moe_grouped_gemm_fused_gather.py (measured 2.876-2.885 ms, 73.2-73.4% of the bf16 peak;
profiled, torch profiler, H200: 2.82 ms of kernels, the gate/up GEMM 1.68 ms, the down GEMM 0.86, the rest
0.29: the combine ~0.14, ``topk`` 0.056, the counting sort 0.035, the router GEMM 0.020, ~0.03 of small
index ops) with its routing replaced. There, after the router GEMM: the logits' fp32 copy, ``topk`` (two
kernels), the softmax, ``device_route``'s two kernels (each of its 512 programs sums the whole 512 x 64
count table) and, for the combine, ``order.long()``, an ``arange`` and a scatter (``sorted_rows``): ~10
kernels, ~0.12 ms. Here ``aisp.kits.moe_topk_route``: ``_topk_count`` (32 tokens a program: top-8 by eight
rounds of max, the lowest expert first among equal logits as ``torch.topk`` picks them, the softmax of the 8,
the program's per-expert counts), ``_scan`` (one program: each program's first row per expert, the schedule)
and ``_place`` (order and its inverse in one pass); the combine is moe_combine's kernel given that inverse.
The GEMMs are _fused_gather's. Same experts and gates (bf16 logits, the same ties), same sums.
Expect: measured, H200, 2026-11-29 (two runs): 2.7943 and 2.7862 ms, ~592-593 TFLOP/s, 75.5% and 75.8% of
the bf16 peak, 8.30x [7.47, 9.22] and 5.41x [4.35, 6.73] over noisy baselines (22.56 / 13.77 ms): the pair's
best, 0.105-0.118 ms (3.6-4.1%) under _fused_gather (2.8989 / 2.9039 ms in the same runs), at the slow end
of the estimate (~2.74-2.79 ms, 75.5-77%). Profiled (torch profiler): 2.779 ms of kernels a call in 8
kernels (_fused_gather: 2.854 ms in 14): the up GEMM 1.711 ms, the down GEMM 0.867, the combine 0.142,
the routing 0.060 (router GEMM 0.021, _scan 0.015, _place 0.015, _topk_count 0.007). Not 80% (2.64 ms):
the two GEMMs alone are 2.577 ms, 97.7% of it; 80% needs faster GEMMs, not less routing (README).
Run: python ch17/optimized_moe_grouped_gemm_fused_route.py  |  aisp bench run -t ch17:moe_grouped_gemm
"""

from __future__ import annotations

import torch
from optimized_moe_grouped_gemm_fused_gather import FusedGather
from optimized_moe_grouped_gemm_gather_combine import GatherCombine
from optimized_moe_grouped_gemm_graph import INTERPRET

import aisp


class FusedRoute(FusedGather):
    def forward(self) -> torch.Tensor:
        """The router GEMM (cuBLAS, bf16 logits as ``route``'s), topk_route's 3 kernels, the 2 GEMMs, the combine."""
        if not (self.x.is_cuda or INTERPRET):
            return GatherCombine.run(self)  # CPU tests without the interpreter: the same arithmetic in torch
        from aisp.kits.moe_combine import combine_rows
        from aisp.kits.moe_gather import BK, BM, BN, gather_swiglu  # Triton, imported where it runs
        from aisp.kits.moe_topk_route import topk_route

        k, tile = self.workload.top_k, (BM, BN, BK) if self.x.is_cuda else (16, 16, 16)  # interpreter: small tiles
        _, gates, order, row, sched = topk_route(self.x @ self.w_router, k, tile[0])
        h = gather_swiglu(self.x, order, k, self.w_gate_up, sched, tile)  # _fused_gather's up GEMM and down GEMM
        return combine_rows(torch._grouped_mm(h, self.w_down, offs=sched[0, 1:]), row, gates)


def get_benchmark() -> aisp.Benchmark:
    return FusedRoute()


if __name__ == "__main__":
    aisp.main(get_benchmark)
