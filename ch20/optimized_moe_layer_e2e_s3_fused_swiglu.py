"""Optimized MoE layer, stage 3 of 5: SwiGLU in the gate/up GEMM's epilogue, the combine one gather pass,
the call one CUDA graph (technique from ch17: moe_grouped_gemm's fused_swiglu variant, measured at 69% of
the bf16 peak at this shape; a persistent Triton GEMM as in ch14, a graph as in ch12).

Baseline (baseline_moe_layer_e2e.py): a mask, a host sync and two GEMMs per expert. Stage 2 ran both
expert GEMMs as ``torch._grouped_mm`` with no host sync: profiled at 4.40 ms of kernels a call (GEMMs
55%, SwiGLU 0.72 ms, the two row gathers 0.54, the ``bmm`` combine 0.49) in a 4.94 ms window.
Optimized: stage 2's routing, sort and row gather, then three changes. (1) The gate/up GEMM is
``aisp.kits.moe_swiglu.grouped_swiglu``, ch17's persistent grouped bf16 GEMM in Triton (one program per
SM; each expert's 128-row blocks found from the device schedule of aisp/kits/moe_schedule.py; TMA-fed
wgmma): a tile accumulates 128 gate and the matching 128 up columns of the stored ``w_gate_up`` (the
kit's (experts, dim, 2 ffn) layout, gate first, as ch17's: no re-layout) from one x tile and stores
silu(gate) * up: the (rows, 2 ffn) intermediate is never written (268 MB stored, not 537 + the SwiGLU's
1.34 GB). The down GEMM stays ``_grouped_mm``. (2) The combine is ``aisp.kits.moe_combine.gather_combine``
(ch17's): each token's 8 rows read once, gate-weighted and summed in fp32 (no reordered copy, no ``bmm``).
(3) Nothing waits for the host, so setup captures the call as one CUDA graph (the harness refills x in
place): no launch gaps (0.40 ms a call in stage 2's profile).
Expect: measured, H200, 2026-11-29 (two runs): 3.1194 and 3.0814 ms, 530-537 TFLOP/s, 67.7% and 68.5%
of the bf16 peak, 4.32x [4.20, 4.44] and 4.81x [3.85, 6.01] over the baseline (13.41 / 13.14 ms); stage
2 read 4.5999 / 4.5661 ms in the same runs, so this stage is 1.47-1.48x over it (estimated 1.45-1.6x).
Estimated before (arithmetic): ~3.0-3.35 ms, 63-70%: stage 2's 4.40 ms of kernels - 0.72 (SwiGLU) -
0.75 (the combine's gather and bmm) + ~0.15 (the gather combine) + 0-0.25 (the Triton up GEMM), no host
gaps; ch17's same design at the same shape measured 3.051-3.121 ms.
Run: python ch20/optimized_moe_layer_e2e_s3_fused_swiglu.py  |  aisp bench run -t ch20:moe_layer_e2e
"""

from __future__ import annotations

import dataclasses
import os

import torch
from optimized_moe_layer_e2e_s2_grouped_gemm import GroupedExperts

import aisp
from aisp.kits.graphs import GraphReplay
from aisp.kits.moe import HAS_GROUPED_MM, route, sort_by_expert
from aisp.kits.moe_schedule import schedule

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
"""Under the Triton interpreter (CPU tests) the kernels run on CPU tensors, at small tiles."""


class FusedSwiGLU(GraphReplay, GroupedExperts):
    workload = dataclasses.replace(GroupedExperts.workload, requires=aisp.Requirements(
        cuda=True, min_compute_capability=(9, 0), packages=("triton",)))  # TMA-fed wgmma: Hopper
    scratch = ("out",)  # the graph's output, rewritten by every replay

    def setup(self) -> None:
        """Untimed: the inputs, one eager call (compiles, autotunes) off the capture, then the call captured."""
        if self.device.type == "cuda" and not HAS_GROUPED_MM:
            raise aisp.Unavailable(f"torch {torch.__version__} lacks _grouped_mm (the down GEMM)")
        super().setup()
        self.capture()

    def forward(self) -> torch.Tensor:
        if not (self.x.is_cuda or INTERPRET):
            return GroupedExperts.run(self)  # stage 2's arithmetic in torch (CPU tests without Triton)
        from aisp.kits.moe_combine import gather_combine  # Triton, imported where it runs
        from aisp.kits.moe_swiglu import BK, BM, BN, grouped_swiglu

        w = self.workload
        ids, gates = route(self.x, self.w_router, w.top_k)
        order, counts = sort_by_expert(ids, w.experts, count_on_device=True)
        xs = self.x[order // w.top_k]
        tile = (BM, BN, BK) if self.x.is_cuda else (16, 16, 16)  # the interpreter: the CPU tests' small shapes
        h = grouped_swiglu(xs, self.w_gate_up, schedule(counts, tile[0]), tile)  # silu(gate) * up, (rows, ffn)
        y = torch._grouped_mm(h, self.w_down, offs=counts.cumsum(0).to(torch.int32))
        return gather_combine(y, order, gates)


def get_benchmark() -> aisp.Benchmark:
    return FusedSwiGLU()


if __name__ == "__main__":
    aisp.main(get_benchmark)
