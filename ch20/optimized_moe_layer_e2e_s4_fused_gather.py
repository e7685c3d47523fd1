"""Optimized MoE layer, stage 4 of 5: the row gather inside the gate/up GEMM, the sort and schedule on the
device (technique from ch17: moe_grouped_gemm's fused_gather variant, measured at 73% of the bf16 peak at
this shape; ch19's counting sort, as ch17 uses it).

Baseline (baseline_moe_layer_e2e.py): a mask, a host sync and two GEMMs per expert. Stage 3 ran the gate/up
GEMM with a SwiGLU epilogue over a gathered copy of x, the combine as one gather pass, the call as one CUDA
graph: profiled (torch profiler, H200, 2026-11-29) at 3.04 ms of kernels a call: ``_grouped_swiglu`` 1.555 ms,
the down ``_grouped_mm`` 0.853, the row gather ``x[order // k]`` 0.263, the combine 0.142, top-k 0.056,
the radix sort 0.052 (8 kernels), index ops 0.029, the router GEMM 0.020.
Optimized: stage 3 with two changes. (1) The gate/up GEMM is ``aisp.kits.moe_gather.gather_swiglu`` (ch17's
kernel, moved into the kits so both chapters use it): the same persistent Triton GEMM with the SwiGLU
epilogue over the same schedule, but its x tile is read by row from the unsorted tokens (row r of a block
is token ``order[r] // top_k``) by 16-byte cp.async into shared memory (TMA cannot gather rows on sm_90;
the weights stay on TMA): the (131,072, 2,048) gathered copy (537 MB written, 537 MB read back) is never
made. (2) The routing is ``aisp.kits.moe_schedule.device_route`` at 256 assignments a program (a stable
two-kernel counting sort, argsort's order exactly) which also writes the tile schedule, in place of the
stable ``argsort``, the ``index_add_`` count, the schedule's torch ops and the offsets' cumsum; the down
``_grouped_mm`` reads its offsets from the schedule. The combine and the graph are stage 3's.
Expect: measured, H200, 2026-11-29 (two runs): 2.8316 and 2.8681 ms, 584 and 577 TFLOP/s, 74.5% and 73.6%
of the bf16 peak, 7.37x [6.84, 7.95] and 7.74x [5.79, 10.34] over the baseline (20.06 / 22.53 ms); stage 3
read 3.0504 / 3.1174 ms in the same runs, so this stage is 1.08-1.09x over it, at the fast end of the
estimate (~2.85-2.95 ms, ~71-74%, 1.04-1.09x: stage 3's 3.04 ms of kernels - 0.263 (the gather) + 0.12 (x
by cp.async, ch17's 1.676 ms against 1.555) - ~0.045 (the sort)). Profiled (torch profiler, H200,
2026-11-29): 2.77 ms of kernels a call (14 kernels; stage 3 3.03 ms, 52): ``_gather_swiglu`` 1.642 ms (stage
3's GEMM 1.554 plus 0.088 for x by cp.async, the 0.266 ms gather gone), the down ``_grouped_mm`` 0.843, the
combine 0.141, top-k 0.056, ``_sort`` 0.036; ~0.06-0.10 ms of the call is outside the kernels.
Run: python ch20/optimized_moe_layer_e2e_s4_fused_gather.py  |  aisp bench run -t ch20:moe_layer_e2e
"""

from __future__ import annotations

import torch
from optimized_moe_layer_e2e_s2_grouped_gemm import GroupedExperts
from optimized_moe_layer_e2e_s3_fused_swiglu import INTERPRET, FusedSwiGLU

import aisp
from aisp.kits.moe import route
from aisp.kits.moe_schedule import device_route

CHUNK = 256
"""Assignments a routing program: at device_route's default 1,024 with 64 experts its sort kernel spills
4.4 KB a thread at sm_90; at 256, 288 bytes (ch17's compile)."""


class FusedGather(FusedSwiGLU):
    def forward(self) -> torch.Tensor:
        if not (self.x.is_cuda or INTERPRET):
            return GroupedExperts.run(self)  # stage 2's arithmetic in torch (CPU tests without Triton)
        from aisp.kits.moe_combine import gather_combine  # Triton, imported where it runs
        from aisp.kits.moe_gather import BK, BM, BN, gather_swiglu

        w = self.workload
        tile = (BM, BN, BK) if self.x.is_cuda else (16, 16, 16)  # the interpreter: the CPU tests' small shapes
        ids, gates = route(self.x, self.w_router, w.top_k)
        order, _, sched = device_route(ids.reshape(-1), gates.reshape(-1), w.experts, tile[0], chunk=CHUNK)
        h = gather_swiglu(self.x, order, w.top_k, self.w_gate_up, sched, tile)  # silu(gate) * up, (rows, ffn)
        y = torch._grouped_mm(h, self.w_down, offs=sched[0, 1:])  # each expert's end row, on the device
        return gather_combine(y, order.long(), gates)


def get_benchmark() -> aisp.Benchmark:
    return FusedGather()


if __name__ == "__main__":
    aisp.main(get_benchmark)
