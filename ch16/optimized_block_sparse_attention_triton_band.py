"""Optimized block-sparse attention, our Triton band kernel: the pattern's key tiles found, not listed.

Baseline (baseline_block_sparse_attention.py): dense SDPA with an (8192, 8192) boolean mask (sliding
window 1,024 + 128 sink tokens): every 128 x 128 block scored, ~1.1 TFLOP.
Optimized: ``aisp.kits.sparse_flash.band_flash_attention``, the `_triton` variant's kernel (ch18
``_ahead``'s loop: TMA descriptors, 128 x 64 tiles, 8 warps, 2 stages, 128 registers, two programs an
SM) with each query block's key tiles computed from the band instead of read from the CSR lists: the
2 sink tiles and the window's 14 full ones unmasked, then the 4 partial ones (the causal diagonal's
2, the window's left edge's 2) masked. The lists are still built in setup from the workload's rule
(``visible``), which checks that the band the kernel masks by is that rule. Why it should be faster:
no tile-number load a tile (a global load whose value feeds the next K copy's coordinate) and fewer
live tile numbers. Compiled for sm_90a without a GPU: 128 registers, no spills, no ptxas advisory, 329
SASS instructions an unmasked key tile, 480 a masked one (`_triton`: 342, 509; ch18 ``_ahead``: 325, 474).
Expect: not yet measured. Estimate (arithmetic, not a measurement): 4.3% fewer SASS instructions a
query block (16 x 329 + 4 x 480 against 16 x 342 + 4 x 509); if the time follows them, 0.31-0.33 ms
against `_triton`'s 0.3356, 56-59% of the bf16 peak on the kept FLOPs: short of 80% (the tiles compute
1,280 keys a row for ~1,150 kept, 90%).
Run: python ch16/optimized_block_sparse_attention_triton_band.py  |  aisp bench run -t ch16:block_sparse_attention
"""

from __future__ import annotations

import torch
from optimized_block_sparse_attention_triton import TritonBlockSparse

import aisp
from aisp.kits.sparse_flash import band_flash_attention


class TritonBandBlockSparse(TritonBlockSparse):
    def run(self) -> torch.Tensor:
        return band_flash_attention(self.q, self.k, self.v, self.tiles)


def get_benchmark() -> aisp.Benchmark:
    return TritonBandBlockSparse()


if __name__ == "__main__":
    aisp.main(get_benchmark)
