"""Optimized fp8 MoE, device schedule: fused_passes' kernels with routing and tile schedule on the GPU,
the whole call one CUDA graph.

Baseline (baseline_fp8_moe.py): bf16 expert GEMMs over tokens sorted by expert.
Optimized: optimized_fp8_moe_fused_passes.py (measured 5.103 ms a call with 3.81 ms of kernels, the
GPU busy 65% of the window, idle on the routing's host sync: torch profiler, H200; the ``.tolist()``
of the counts, and by PyTorch's code also bincount's read of the max and the tile table's blocking
copy) with nothing on the host. Two Triton kernels (aisp/kits/moe_schedule.py) replace the stable argsort,
the gate gather, ``bincount().tolist()`` and the table: ``_count`` (a program per 1,024 assignments)
counts each expert's assignments in its chunk; ``_sort`` sums the chunks' counts (32 x 8), puts each
assignment at its expert's first row + the earlier chunks' count + its rank in its chunk (a stable
counting sort: argsort's order exactly), gathers its gate, and writes the schedule (int32): each
expert's first row, then its first 128-row block (exclusive cumsum of ceil(count / 128)), totals
last. The grouped GEMM (the Triton variant's tile walk and wgmma loop) keeps its fixed grid of one
program per SM, reads the block count from the schedule, finds a block's expert by counting the
experts whose blocks end at or before it, and stops past the last tile: the same tiles in the same
order, so the same bits. With no host sync the call (router GEMM, softmax, top-k, 2 routing kernels,
fused_passes' 3 row kernels, 2 GEMMs) is captured once in setup and replayed: no host or launch gaps
(~1.2 us a graph node); the harness refills x in place, so the replay reads the new tokens.
Expect: measured, H200, 2026-11-29: 8.931 -> 3.687 ms, 2.42x [2.41, 2.43], then 8.372 -> 3.734 ms,
2.25x [2.24, 2.26]: ~1,175-1,190 TFLOP/s, 82-83% of the fp8 peak, 1.37-1.38x fused_passes' 5.103 ms
(estimated 3.75-3.85 ms): with no host sync the GPU no longer idles while the host builds the schedule.
Run: python ch19/optimized_fp8_moe_device_schedule.py  |  aisp bench run -t ch19:fp8_moe
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from ch19_fp8 import E4M3
from ch19_moe_schedule import grouped_gemm_sched
from optimized_fp8_moe_fused_passes import Fp8GroupedFusedPasses, combine_rows, gather_quantize, gelu_quantize

import aisp
from aisp.kits.graphs import GraphReplay
from aisp.kits.moe_schedule import device_route


class Fp8DeviceSchedule(GraphReplay, Fp8GroupedFusedPasses):
    scratch = ("out",)  # the graph's output, rewritten by every replay

    def prepare(self) -> None:
        """Untimed: fused_passes' weights, one eager call (compiles, autotunes), then the call captured."""
        super().prepare()
        self.capture()

    def forward(self) -> torch.Tensor:
        if not self.x.is_cuda:
            return Fp8GroupedFusedPasses.run(self)  # fused_passes' arithmetic, in torch (CPU tests)
        top_k, (n_experts, _) = self.workload.top_k, self.router.shape
        gates, experts = F.linear(self.x, self.router).float().softmax(-1).topk(top_k, dim=-1)  # as route_order
        order, gate, sched = device_route(experts.flatten(), gates.flatten(), n_experts)
        x8, sx, pos = gather_quantize(self.x, order, top_k)
        h8, sh = gelu_quantize(grouped_gemm_sched(x8, sx, self.up[0].view(E4M3), self.up[1], sched), gate)
        return combine_rows(grouped_gemm_sched(h8, sh, self.down[0].view(E4M3), self.down[1], sched), pos, top_k)


def get_benchmark() -> aisp.Benchmark:
    return Fp8DeviceSchedule()


if __name__ == "__main__":
    aisp.main(get_benchmark)
