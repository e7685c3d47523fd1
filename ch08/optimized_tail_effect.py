"""Optimized tail effect (CUDA C++): a persistent grid of exactly the blocks the GPU holds at once.

Baseline (baseline_tail_effect.py): 265 one-tile blocks, 264 resident: the last block runs alone in
a second wave, ~half a wave of time for 0.4% of the work.
Optimized: ``persistent_blocks`` (tail_waves.cu) launched with SMs x resident blocks per SM (264 on
an H100/H200, from ``cudaOccupancyMaxActiveBlocksPerMultiprocessor``); each block strides over groups
of 4 units of 1,024 elements, the 128 units left over one at a time, so the 33,920 units split 128 or
129 per block: one wave, every SM busy to the end. Its body is the baseline's (4 FMA chains a step,
512 FFMA of 541 SASS instructions, the next step's loads before them), so only the waves differ.
Expect: measured, H200, 2026-11-29, the 4-unit body: 1.44x [1.43, 1.44] (0.2242 -> 0.1563 ms),
56.9 TFLOP/s: 90.6% of the measured FFMA rate (62.8 TFLOP/s); one unit a step it was 0.186 ms, 76%.
Run: python ch08/optimized_tail_effect.py  |  aisp bench run -t ch08:tail_effect
"""

from __future__ import annotations

from baseline_tail_effect import PerTileBlocks

import aisp


class PersistentBlocks(PerTileBlocks):
    mode = 1


def get_benchmark() -> aisp.Benchmark:
    return PersistentBlocks()


if __name__ == "__main__":
    aisp.main(get_benchmark)
