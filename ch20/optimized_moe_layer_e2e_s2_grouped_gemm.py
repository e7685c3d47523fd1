"""Optimized MoE layer, stage 2 of 5: every expert in one grouped GEMM, no host sync (technique from
ch17: moe_grouped_gemm; one launch for many small GEMMs, as ch09's tiling fills the SMs).

Baseline (baseline_moe_layer_e2e.py): a mask, a host sync and two GEMMs per expert. Stage 1 sorted
the tokens by expert once, with one host sync, and still ran 128 separate GEMMs.
Optimized: stage 1 with the expert loop replaced by two ``torch._grouped_mm`` calls over the sorted
rows, the per-expert row offsets (``cumsum`` of the counts, int32) read on the device: no host sync
at all, 2 GEMM launches instead of 128, and the grouped kernel's tiles span experts, so no expert's
~16-tile GEMM runs alone on a 132-SM GPU. Where this torch lacks ``_grouped_mm``: two ``bmm`` over
a buffer padded to the busiest expert (one host sync; the padding rows are wasted FLOPs).
Expect (measured, H200, 2026-11-27): 5.683 ms, 3.10x [2.65, 3.63] over the baseline, 1.59x over
stage 1 (estimated ~1.2-1.4x), cv 0.007; 290.9 TFLOP/s, 37.2% of 783 TFLOP/s bf16. An earlier
fp8 stage 3 measured 6.676 ms, slower, and was dropped (README). Measured again (H200, 2026-11-29), after
``combine`` gathers the rows by the inverse order instead of scattering them: 4.817 ms, 4.41x [4.25, 4.58], 43.8%
of bf16 (343 TFLOP/s; 39% and ~5.26 ms of kernels a call before the change). Profiled again (torch profiler,
2026-11-29): 4.40 ms of kernels a call, the grouped GEMMs 2.43 ms (55%), SwiGLU 16%, the two row gathers 12%,
the ``bmm`` combine 11%; GPU busy 89%.
Run: python ch20/optimized_moe_layer_e2e_s2_grouped_gemm.py  |  aisp bench run -t ch20:moe_layer_e2e
"""

from __future__ import annotations

import torch
from optimized_moe_layer_e2e_s1_sorted_routing import SortedExpertLoop

import aisp
from aisp.kits.moe import expert_ffn


class GroupedExperts(SortedExpertLoop):
    def experts(self, xs: torch.Tensor, sorted_ids: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        return expert_ffn(xs, sorted_ids, counts, self.w_gate_up, self.w_down)


def get_benchmark() -> aisp.Benchmark:
    return GroupedExperts()


if __name__ == "__main__":
    aisp.main(get_benchmark)
