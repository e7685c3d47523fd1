"""Optimized grouped GEMM, TMA warp-specialized variant: the TMA kernel's K loop split by Triton into a
TMA producer warpgroup and two 64-row consumer warpgroups.

Baseline (baseline_triton_grouped_gemm.py): a Python loop of 64 ``torch.mm`` calls, each one
half-empty wave on the GPU.
Optimized: ``grouped_mm_tma_ws`` (ch14_grouped_tma_ws.py), the persistent TMA walk of
optimized_triton_grouped_gemm_tma.py over the same table of 128-row blocks (padding 18.6%), its K
loop marked ``warp_specialize=True`` and 4 warps a config. Compiled for sm_90, Triton 3.6 makes 12
warps: a producer warpgroup (40 registers) that issues the A/B copies of the program's tiles one
after another, and two consumer warpgroups (232 registers) of 64 rows each that multiply (wgmma)
and store, synchronized by mbarriers instead of ``_tma``'s block-wide wait after each copy. The
producer runs ahead into the next tile while the consumers store this one, so ``_tma``'s
``flatten=True`` is not needed (it would turn the specialization off). The epilogue is one masked
store per consumer (the pass rejects ``_tma``'s quartered store). Tiles from a 3-config autotune
(128 x 256, 3 or 4 stages; 128 x 128, 4), run once at the first call (untimed).
Expect: not yet measured on a GPU. Estimated: 0.25-0.30 ms against ``_tma``'s 0.280 ms (475-570
TFLOP/s): the same tiles and bytes, with the copies off the consumers' instruction stream; the gain
is bounded by each consumer still waiting for its own wgmma every K step, and the padded rows keep
it under 81% of the peak.
Run: python ch14/optimized_triton_grouped_gemm_tma_ws.py  |  aisp bench run -t ch14:triton_grouped_gemm
"""

from __future__ import annotations

import torch
from ch14_grouped_tma_ws import grouped_mm_tma_ws
from optimized_triton_grouped_gemm import PersistentGroupGemm

import aisp


class TMAWarpSpecializedGroupGemm(PersistentGroupGemm):
    def run(self) -> torch.Tensor:
        return grouped_mm_tma_ws(self.a, self.b, self.table, self.out, self.programs)


def get_benchmark() -> aisp.Benchmark:
    return TMAWarpSpecializedGroupGemm()


if __name__ == "__main__":
    aisp.main(get_benchmark)
