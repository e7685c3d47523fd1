"""Baseline MoE grouped GEMM: the expert loop of a first MoE layer, a boolean mask and a host sync per expert.

Baseline: an MoE FFN over a 16,384-token prefill batch (width 2,048; 64 SwiGLU experts of width
1,024; top-8 routing, so 131,072 token-expert assignments, ~2,048 per expert). Both sides route the
same way (one router GEMM, top-8, softmax over the 8 logits). Then, as most first MoE layers are
written: for each expert, ``(ids == e).nonzero()`` finds its tokens (a boolean mask over all
assignments and a device-to-host sync to size the result), the tokens are gathered, two GEMMs and
the SwiGLU run, and the gated outputs are added into the result with ``index_add_`` (``aisp.kits.moe.masked_moe``). 64 syncs stall
the launch queue 64 times; each expert's ~2,048 x 2,048 x 2,048 GEMM is too short to hide the gap.
Optimized (optimized_moe_grouped_gemm.py): sort the assignments by expert once and run all experts
as two grouped GEMMs over the sorted tokens (``torch._grouped_mm`` with per-expert row offsets held
on the device): no mask per expert, one host sync (``bincount``), 2 GEMM launches instead of 128.
Variant ``_padded_bmm``: where ``_grouped_mm`` is missing, two ``bmm`` over a buffer padded to the
busiest expert's rows (one host sync for that size; the padding rows are wasted FLOPs).
Ceiling: bf16 tensor cores (1.65 TFLOP per call, 783 TFLOP/s on an H200: ~2.1 ms).
Expect (measured, H200, 2026-11-26): 12.97 -> 7.363 ms, 1.80x [1.68, 1.92] (estimated 6-8 -> 2.7-3.5
ms, 2-2.5x): 224.6 TFLOP/s, 28.7% of the bf16 peak (baseline 16.3%), not the 60-75% estimated. Bound
(not profiled): the memory-bound work outside the GEMMs (argsort, the gather of 131,072 rows, the
SwiGLU, the fp32 ``index_add_`` scatter) and small per-expert GEMMs (64 experts x ~2,048 rows each).
Padded bmm: 10.49 ms, 1.26x [1.17, 1.35], 20.1% of peak.
Tolerance: bf16 defaults (each assignment's product is the same; the fp32 index_add_ order differs).
Run: python ch17/baseline_moe_grouped_gemm.py  |  aisp bench run -t ch17:moe_grouped_gemm
"""

from __future__ import annotations

import torch

import aisp
from aisp.kits.moe import MoEWorkload, masked_moe, moe_inputs, moe_workload

GPU_SIZED = aisp.Requirements(cuda=True)
"""Sized for an H100/H200; tests/test_ch17_pairs.py runs the same code at tiny sizes on a CPU."""
WORKLOAD = moe_workload(GPU_SIZED, 3,
                        ceiling_note="profiled (torch profiler, H200): _fused_route 2.78 ms of kernels: up GEMM 1.71 ms (82%), down GEMM 0.87 (81%), combine 0.14, routing 0.06 in 4 kernels",
                        window="idle")
"""Bytes: the expert weights and three passes over the bf16 (tokens, dim) activations."""


class MaskedExpertLoop(aisp.Benchmark):
    """Input ``x`` (tokens, dim); returns the MoE output (tokens, dim) in x's dtype."""

    workload: MoEWorkload = WORKLOAD
    inputs = ("x",)

    def setup(self) -> None:
        self.x, self.w_router, self.w_gate_up, self.w_down = moe_inputs(self.workload, self.generator(), self.device)

    def run(self) -> torch.Tensor:
        return masked_moe(self.x, self.w_router, self.w_gate_up, self.w_down, self.workload.top_k)


def get_benchmark() -> aisp.Benchmark:
    return MaskedExpertLoop()


if __name__ == "__main__":
    aisp.main(get_benchmark)
