"""Baseline MoE layer, end to end: a per-expert Python loop with a boolean mask and a host sync per expert.

Case study, stage 0 of 5. An MoE FFN forward over a 16,384-token prefill batch (width 2,048; 64
SwiGLU experts of width 1,024; top-8, so 131,072 token-expert assignments, ~2,048 per expert; bf16).
Both sides route the same way (one router GEMM, one top-8, softmax over the 8 logits). Then, as a
first MoE layer is written: for each expert, ``(ids == e).nonzero()`` finds its tokens (a mask over
all assignments and a device-to-host sync to size the result), the tokens are gathered, two GEMMs
and the SwiGLU run, and the gated outputs are added into an fp32 result with ``index_add_`` (``aisp.kits.moe.masked_moe``).
64 syncs drain the launch queue 64 times; each expert's ~2,048 x 2,048 x 2,048 GEMM is a single
short wave of tiles.
Optimized, cumulatively (each file's header names the chapter the technique comes from):
  s1_sorted_routing  one sort by expert, one host sync, per-expert GEMMs over sorted slices (ch17)
  s2_grouped_gemm    both expert GEMMs as one ``torch._grouped_mm`` each, no host sync (ch17, ch09)
  s3_fused_swiglu    SwiGLU in the gate/up GEMM's epilogue (Triton), a one-pass gather combine, one CUDA
                     graph (ch17, ch14, ch12)
  s4_fused_gather    the row gather inside the gate/up GEMM (cp.async x rows), the sort and tile schedule
                     on the device (ch17, ch19)
  s5_device_route    top-8, softmax, the sort, its inverse and the schedule in three Triton kernels (ch17)
(An earlier fp8 stage 3, e4m3 experts through ``_scaled_grouped_mm``, measured slower than stage 2 and was
dropped: see the README.)
Ceiling: the expert GEMMs on the tensor cores: 1.65 TFLOP per call, ~2.1 ms at 783 TFLOP/s bf16.
Expect (measured, H200, 2026-11-27): 17.81 ms per call [p10 16.7, p90 18.19], cv 0.19 (estimated
~11-14 ms from ch17's 12.97 ms for the same loop), 92.9 TFLOP/s, 11.9% of 783 TFLOP/s bf16. Measured again
(H200, 2026-11-29, ``--fork-workers``): 21.46 ms [p10 20.92, p90 21.91], 9.8% of bf16; s2 4.817 ms, 4.41x.
Tolerance: the dropped fp8 stage's, kept as the 2026-11-27 run verified under it (the bf16 stages
sit well inside it): relative L2 0.1, |err| <= 0.25 + 0.05 |ref| (~0.5 of the output RMS).
Run: python ch20/baseline_moe_layer_e2e.py  |  aisp bench run -t ch20:moe_layer_e2e
"""

from __future__ import annotations

import torch
from ch20_moe import case_workload

import aisp
from aisp.kits.moe import MoEWorkload, masked_moe, moe_inputs

WORKLOAD = case_workload(aisp.Requirements(cuda=True),
                         ceiling_note="profiled (torch profiler, H200): s4 2.77 ms of kernels: gate/up GEMM + row gather 1.64 ms "
                                      "(~85%), down GEMM 0.84 (~83%), combine 0.14; s5 routing 0.04 of 0.15",
                         window="idle")
"""Sized for an H100/H200; tests/test_ch20_cases.py runs the same code at tiny sizes on a CPU."""


class MaskedExpertLoop(aisp.Benchmark):
    """Input ``x`` (tokens, dim); returns the MoE output (tokens, dim) in x's dtype."""

    workload: MoEWorkload = WORKLOAD
    inputs = ("x",)

    def setup(self) -> None:
        self.x, self.w_router, self.w_gate_up, self.w_down = moe_inputs(self.workload, self.generator(), self.device)
        self.prepare()

    def prepare(self) -> None:
        """Model-load work a stage does once (none in this path; a hook for a stage that converts weights)."""

    def run(self) -> torch.Tensor:
        return masked_moe(self.x, self.w_router, self.w_gate_up, self.w_down, self.workload.top_k)


def get_benchmark() -> aisp.Benchmark:
    return MaskedExpertLoop()


if __name__ == "__main__":
    aisp.main(get_benchmark)
