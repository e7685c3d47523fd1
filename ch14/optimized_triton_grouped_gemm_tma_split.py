"""Optimized grouped GEMM, TMA split variant: the TMA kernel with 64-row blocks for the bands' short tails.

Baseline (baseline_triton_grouped_gemm.py): a Python loop of 64 ``torch.mm`` calls, each one
half-empty wave on the GPU.
Optimized: ``grouped_mm_tma_split`` (ch14_grouped_tma_split.py), the persistent TMA walk of
optimized_triton_grouped_gemm_tma.py over a table whose blocks have a height: 128 rows, or 64
where a band's last block holds 1-64 rows (33 of the 64 bands). The tensor cores multiply 18,752
rows instead of 20,864 for the same 16,984 real ones: padding 9.4% instead of 18.6% (computed
from the table, not measured), so a tenth fewer tensor-core FLOPs. Each tile branches on its
block's height into a 128-row or a 64-row path, which costs the flattened tile loop of ``_tma``
(each tile drains its K pipeline before its epilogue). The table is built once per routing in
setup, as for ``_tma``; tiles from the same 3-config autotune, run once at the first call (untimed).
Expect: estimated 10% less time at ``_tma``'s rate per multiplied row (18,752 / 20,864 rows).
Measured (H200, 2026-11-29): no faster. Whole-book run 0.2626 ms against ``_tma``'s 0.2600 (69% and
70% of the pair's ceiling); the GPU test 0.287 against 0.280 ms (496 and 509 TFLOP/s): the rows saved
are spent in the unflattened tile loop, each tile draining its K pipeline before its epilogue.
Run: python ch14/optimized_triton_grouped_gemm_tma_split.py  |  aisp bench run -t ch14:triton_grouped_gemm
"""

from __future__ import annotations

import torch
from ch14_grouped_tma import BM
from ch14_grouped_tma_split import grouped_mm_tma_split, split_block_table
from optimized_triton_grouped_gemm import PersistentGroupGemm

import aisp


class TMASplitGroupGemm(PersistentGroupGemm):
    def setup(self) -> None:
        super().setup()
        self.table = split_block_table(self.rows, BM, self.device)

    def run(self) -> torch.Tensor:
        return grouped_mm_tma_split(self.a, self.b, self.table, self.out, self.programs)


def get_benchmark() -> aisp.Benchmark:
    return TMASplitGroupGemm()


if __name__ == "__main__":
    aisp.main(get_benchmark)
