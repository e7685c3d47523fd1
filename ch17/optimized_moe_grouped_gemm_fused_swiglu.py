"""Optimized MoE grouped GEMM, fused SwiGLU: the up GEMM's epilogue stores silu(gate) * up; one CUDA graph.

Baseline (baseline_moe_grouped_gemm.py): per expert a mask, ``nonzero()`` (a host sync), a gather, two
GEMMs and an ``index_add_``.
Optimized: optimized_moe_grouped_gemm_graph.py (routing with no host sync, the call one CUDA graph) with
the up GEMM and the SwiGLU one kernel: ``moe_swiglu.grouped_swiglu``, a persistent grouped bf16 GEMM
in Triton (one program per SM; 128-row blocks of each expert's sorted rows, found from the device
schedule of aisp/kits/moe_schedule.py, the walk ch19's device_schedule variant measured at 82-83% of
its fp8 peak; tiles fed by TMA into wgmma, 3-4 stages of 48 KB, 169 registers, no spills at sm_90).
A tile accumulates an expert's 128 gate columns and the matching 128 up columns from the same x tile
(two 128 x 128 fp32 accumulators, the weights as stored: no re-layout), and its epilogue stores
silu(gate) * up in bf16: the (rows, 2 ffn) intermediate is never written nor read back (537 MB written
+ 805 MB of the row pass, ~0.23 ms, or the 0.71 ms torch SwiGLU of gather_combine), and the up GEMM
stores 268 MB instead of 537. The down GEMM stays ``torch._grouped_mm`` (CUTLASS, ~690 TFLOP/s
profiled), and the combine gather_combine's Triton gather.
Expect: measured, H200, 2026-11-29 (four runs): 3.051, 3.091, 3.0737 and 3.1205 ms, 67.6-69.2% of the
bf16 peak (~530-542 TFLOP/s), 4.30x [4.19, 4.41], 4.20x [3.63, 4.85], 5.06x [4.54, 5.63], 4.85x [4.18,
5.63]; best of the pair in the first two runs, since passed by _fused_gather (2.876-2.885 ms); _graph
read 3.224-3.306 ms in the same runs: the epilogue SwiGLU beats _grouped_mm + a SwiGLU pass by 0.16-0.19 ms.
Estimated before (arithmetic): ~2.95-3.2 ms, 66-71%: gather_combine's 3.73 ms of kernels - 0.71
(SwiGLU) - 0.37 of idle, the up GEMM (1.10 TFLOP) at 600-690 TFLOP/s against _grouped_mm's ~1.59 ms.
Run: python ch17/optimized_moe_grouped_gemm_fused_swiglu.py  |  aisp bench run -t ch17:moe_grouped_gemm
"""

from __future__ import annotations

import torch
from optimized_moe_grouped_gemm_graph import INTERPRET, GraphedExperts

import aisp
from aisp.kits.moe_schedule import schedule


class FusedSwiGLU(GraphedExperts):
    def up(self, xs: torch.Tensor, counts: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
        if not (xs.is_cuda or INTERPRET):
            return super().up(xs, counts, offs)  # the same arithmetic by torch (CPU tests)
        from aisp.kits.moe_swiglu import BK, BM, BN, grouped_swiglu  # Triton, imported where it runs

        tile = (BM, BN, BK) if xs.is_cuda else (16, 16, 16)  # the interpreter: the CPU tests' small shapes
        return grouped_swiglu(xs, self.w_gate_up, schedule(counts, tile[0]), tile)


def get_benchmark() -> aisp.Benchmark:
    return FusedSwiGLU()


if __name__ == "__main__":
    aisp.main(get_benchmark)
