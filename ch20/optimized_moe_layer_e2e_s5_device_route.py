"""Optimized MoE layer, stage 5 of 5: the routing after the router GEMM in three Triton kernels (technique
from ch17: moe_grouped_gemm's fused_route variant, 3.7-4.1% faster than its fused_gather there, 2.79 against
2.90 ms, at this shape).

Baseline (baseline_moe_layer_e2e.py): a mask, a host sync and two GEMMs per expert. Stage 4 read x's rows
inside the gate/up GEMM and sorted on the device: profiled (torch profiler, H200, 2026-11-29) at 2.77 ms of
kernels a call in 14: ``_gather_swiglu`` 1.642 ms, the down ``_grouped_mm`` 0.843, the combine 0.141, and
~0.12 ms of routing in ~9 kernels after the router GEMM (0.020): the logits' fp32 copy, top-k's two kernels
(``gatherTopK`` 0.056, ``bitonicSortKVInPlace`` 0.014), the softmax, the counting sort (``_count`` 0.004,
``_sort`` 0.036), ``order.long()`` and the combine's inverse (``sorted_rows``: ``arange`` and a scatter).
Optimized: stage 4 with that routing replaced by ``aisp.kits.moe_topk_route.topk_route`` (ch17's kit, as
ch17 launches it): ``_topk_count`` (32 tokens a program: the top-8 by eight rounds of max over the bf16
logits, the lowest expert first among equal logits as ``torch.topk`` takes them on CUDA, the softmax of
the 8 in fp32, the program's per-expert counts), ``_scan`` (one program: each program's first row per
expert, the tile schedule) and ``_place`` (the stable order, argsort's, and its inverse in one pass); the
combine is the same ``_gather_combine`` kernel given that inverse (``combine_rows``). The two GEMMs and
the graph are stage 4's. Same experts and gates as ``route`` (the same ties), same sums.
Expect: measured, H200, 2026-11-29: 2.7283 and 2.7235 ms, 77.4% and 77.5% of the bf16 peak, against stage
4's 2.8307 and 2.8025 in the same runs (1.03-1.04x; the estimate had said 2.72-2.78 ms); 9.41x and 4.87x
over a baseline that read 25.7 and 13.1 ms. Not 80% (2.64 ms): the two GEMMs (2.49 ms) and the combine
(0.14) alone are 2.63 ms. Its GPU routing test: the experts match torch.topk's on the baseline's logits
(667 tokens have equal logits at the 8th/9th place).
Run: python ch20/optimized_moe_layer_e2e_s5_device_route.py  |  aisp bench run -t ch20:moe_layer_e2e
"""

from __future__ import annotations

import torch
from optimized_moe_layer_e2e_s2_grouped_gemm import GroupedExperts
from optimized_moe_layer_e2e_s3_fused_swiglu import INTERPRET
from optimized_moe_layer_e2e_s4_fused_gather import FusedGather

import aisp


class DeviceRoute(FusedGather):
    def forward(self) -> torch.Tensor:
        """The router GEMM (cuBLAS: bf16 logits, as ``route``'s), topk_route's 3 kernels, stage 4's 2 GEMMs, the combine."""
        if not (self.x.is_cuda or INTERPRET):
            return GroupedExperts.run(self)  # stage 2's arithmetic in torch (CPU tests without Triton)
        from aisp.kits.moe_combine import combine_rows
        from aisp.kits.moe_gather import BK, BM, BN, gather_swiglu  # Triton, imported where it runs
        from aisp.kits.moe_topk_route import topk_route

        k = self.workload.top_k
        tile = (BM, BN, BK) if self.x.is_cuda else (16, 16, 16)  # the interpreter: the CPU tests' small shapes
        _, gates, order, row, sched = topk_route(self.x @ self.w_router, k, tile[0])
        h = gather_swiglu(self.x, order, k, self.w_gate_up, sched, tile)  # silu(gate) * up, (rows, ffn)
        y = torch._grouped_mm(h, self.w_down, offs=sched[0, 1:])  # each expert's end row, on the device
        return combine_rows(y, row, gates)  # the gather combine through the sort's inverse


def get_benchmark() -> aisp.Benchmark:
    return DeviceRoute()


if __name__ == "__main__":
    aisp.main(get_benchmark)
