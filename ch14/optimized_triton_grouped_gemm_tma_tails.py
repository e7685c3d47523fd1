"""Optimized grouped GEMM, TMA tails variant: 64-row tiles for the bands' short tails, in their own flattened loop.

Baseline (baseline_triton_grouped_gemm.py): a Python loop of 64 ``torch.mm`` calls, each one
half-empty wave on the GPU.
Optimized: ``grouped_mm_tma_tails`` (ch14_grouped_tma_tails.py). Like ``_tma_split`` it ends the 33
bands whose last block holds 1-64 rows in a 64-row block, so the tensor cores multiply 18,752 rows
for the 16,984 real ones instead of ``_tma``'s 20,864: padding 9.4% instead of 18.6% (computed from
the table), 157 GFLOP instead of 175. Unlike ``_tma_split`` (a branch per tile, which stopped
Triton flattening the tile loop: every tile drained its pipeline, and it measured no faster than
``_tma``), each program runs up to three loops of one tile shape each, 128-row tiles, its two 64-row
tiles, 128-row tiles, each flattened and pipelined as ``_tma``'s: at most two drains a program. A
static schedule, built in setup once per routing and SM count (as ``_tma``'s block table), puts a
band's tail tiles beside its 128-row tiles in time (the expert's weights in L2) and balances the
programs' ends; 128 x 256 tiles (the tails 64 x 256), 3 or 4 stages autotuned at the first call.
Expect: not yet measured. Estimate (arithmetic, not a measurement): 157 GFLOP at ``_tma``'s measured
rate on the rows it multiplies (677 TFLOP/s, 86.4% of 783) is 0.233 ms against ``_tma``'s 0.2586
(-10%); the schedule's model (a 128-row tile 25.9 us, a 64-row tile 0.5-0.7 of it, a loop switch
1.5-3 us) gives 0.236-0.249 ms, 4-9% below ``_tma``: 73-77% of the peak counting real rows.
Run: python ch14/optimized_triton_grouped_gemm_tma_tails.py  |  aisp bench run -t ch14:triton_grouped_gemm
"""

from __future__ import annotations

import torch
from ch14_grouped_tma import BM
from ch14_grouped_tma_tails import BN, grouped_mm_tma_tails, tail_schedule
from optimized_triton_grouped_gemm import PersistentGroupGemm

import aisp


class TMATailsGroupGemm(PersistentGroupGemm):
    def setup(self) -> None:
        super().setup()
        self.table = tail_schedule(self.rows, BM, self.workload.n // BN, self.programs, self.device)

    def run(self) -> torch.Tensor:
        return grouped_mm_tma_tails(self.a, self.b, self.table, self.out)


def get_benchmark() -> aisp.Benchmark:
    return TMATailsGroupGemm()


if __name__ == "__main__":
    aisp.main(get_benchmark)
