"""Baseline topology-aware MoE (2 GPUs): experts placed round-robin, so half the tokens cross NVLink.

Baseline: expert-parallel MoE FFN over two ranks (16 SwiGLU experts of width 1,024 on width 4,096,
top-2, bf16; 8 experts per GPU; 16,384 tokens per rank). Expert e lives on rank e mod 2, the
placement a framework picks when it knows nothing about the traffic. Rank r's tokens lean towards
expert group r (experts 8r..8r+7 get ~87% of its assignments: ch17_ep.py), but round-robin splits
every group over both ranks, so ~50% of each rank's 32,768 assignments go over NVLink and come back:
~270 MB each way per rank per call (tokens out, outputs back, bf16).
Optimized (optimized_topology_aware_moe_multigpu.py): the same code with a locality-aware placement,
planned at setup from a calibration batch's routing counts (an expert goes to the rank that sends it
most tokens, 8 per rank): ~13% of the assignments cross, ~70 MB each way. Same experts, same routing,
same math per assignment: only where each expert runs changes. Metrics: ``remote_share`` and
``link_mb_per_rank`` of the last call.
Ceiling: bf16 tensor cores: the router and expert FLOPs of both ranks' tokens, 1.65 TFLOP (2 x 32,768 x
4,096 x 16 + 6 x 65,536 x 4,096 x 1,024), at 2 x 783 TFLOP/s: 1.06 ms. The link saving is the lesson.
Expect (measured, 2 x H200, 2026-11-27): 6.328 -> 5.995 ms, 1.05x [1.04, 1.07] (estimated ~2.6-3.2 ->
~2.0-2.4 ms, 1.2-1.4x): remote share 49% -> 12%, 263 -> 64 MB over NVLink per rank, but the expert
GEMMs and the routing take most of the 6 ms (131 -> 138 TFLOP/s, 17% of bf16), so the link saving is
~0.3 ms of it.
Tolerance: bf16 defaults (each assignment's product runs in another grouped GEMM, so rounding differs).
Run: aisp bench run -t ch17:topology_aware_moe_multigpu  (two GPUs; the harness starts torchrun)
"""

from __future__ import annotations

from ch17_ep import ExpertParallel, ep_workload, uniform_owner

import aisp

WORKLOAD = ep_workload(
    ceiling_note="profiled (torch profiler, 2xH200): expert GEMMs 1.13 of 5.0 ms of kernels; index_add "
                 "0.91, gathers 0.92, sends 0.63-1.2, copies and routing the rest")


class RoundRobinExperts(ExpertParallel):
    workload = WORKLOAD

    def placement(self) -> list[int]:
        return uniform_owner(self.workload.experts, self.world)


def get_benchmark() -> aisp.Benchmark:
    return RoundRobinExperts()


if __name__ == "__main__":
    aisp.main(get_benchmark)
