"""Optimized sliding-window attention, our Triton band kernel: the window's key tiles found, not listed.

Baseline (baseline_sliding_window_attention.py): dense-mask SDPA computes all S^2 scores.
Optimized: ``aisp.kits.sparse_flash.band_flash_attention``, the `_triton` variant's kernel (ch18
``_ahead``'s loop: TMA descriptors, 128 x 64 tiles, 8 warps, 2 stages, 128 registers, two programs an
SM) with each query block's key tiles computed from the window instead of read from the CSR lists:
the 14 full tiles a contiguous range, then the 4 partial ones (the causal diagonal's 2, the window's
left edge's 2) masked. The lists are still built in setup from the pair's own rule (``in_window``),
which checks that the band the kernel masks by is that rule. Why it should be faster: no tile-number
load a tile (a global load whose value feeds the next K copy's coordinate) and fewer live tile
numbers. Compiled for sm_90a without a GPU: 128 registers, no spills, no ptxas advisory, 327 SASS
instructions an unmasked key tile, 480 a masked one (`_triton`: 342, 509; ch18 ``_ahead``: 325, 474).
Expect: not yet measured. Estimate (arithmetic, not a measurement): 4.8% fewer SASS instructions a
query block (14 x 327 + 4 x 480 against 14 x 342 + 4 x 509); if the time follows them (``_triton``'s
1.149 us a tile an SM against ``_ahead``'s ~1.0 tracks 379 against 334 instructions a tile), 0.56-0.59
ms against `_triton`'s 0.6019, 56-59% of the bf16 peak: short of 80% (the 128 x 64 tiles compute 1,152
keys a row for 1,024 kept, 89%; 80% of the kept FLOPs would need 90% of the peak on the computed ones).
Run: python ch13/optimized_sliding_window_attention_triton_band.py  |  aisp bench run -t ch13:sliding_window_attention
"""

from __future__ import annotations

import torch
from optimized_sliding_window_attention_triton import TritonWindowAttention

import aisp
from aisp.kits.sparse_flash import band_flash_attention


class TritonBandWindowAttention(TritonWindowAttention):
    def run(self) -> torch.Tensor:
        return band_flash_attention(self.q, self.k, self.v, self.tiles)


def get_benchmark() -> aisp.Benchmark:
    return TritonBandWindowAttention()


if __name__ == "__main__":
    aisp.main(get_benchmark)
