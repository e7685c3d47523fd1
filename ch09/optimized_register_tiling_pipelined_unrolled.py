"""Optimized register tiling, software-pipelined and its slab loop unrolled twice (``pipelined<2>``).

Baseline (baseline_register_tiling.py): 32 x 32 shared-memory tiles, one output per thread: two
shared-memory loads per FMA.
Optimized: optimized_register_tiling_pipelined.py's kernel (two shared-memory buffers, one barrier
a slab, the next k's operands loaded while this k's FFMAs issue, 8 x 8 outputs per thread) with
two slabs per loop trip: the buffer offsets become constants, so fewer address instructions and
register moves: the loop is 91.3% FFMA (1,024 of 1,122 SASS instructions, 123 registers, no
spills, nvcc 13.0) against 90.0% for both reg_tiled and pipelined<1>. The price: an 18 KB loop
body against 9 KB, more to fetch from the instruction caches. The harness keeps the faster.
Expect: not yet measured. Estimate (arithmetic, not a measurement): at most 1.3% more FFMA issue
than pipelined<1> if instruction fetch does not stall: ~2.65-2.75 ms (~50-52 TFLOP/s, ~80-83% of
the 62.8 TFLOP/s FFMA rate) against reg_tiled's 2.94 ms.
Run: python ch09/optimized_register_tiling_pipelined_unrolled.py  |  aisp bench run -t ch09:register_tiling
"""

from __future__ import annotations

from optimized_register_tiling_pipelined import PipelinedGemm

import aisp


class UnrolledPipelinedGemm(PipelinedGemm):
    entry = "pipelined2_gemm_f32"


def get_benchmark() -> aisp.Benchmark:
    return UnrolledPipelinedGemm()


if __name__ == "__main__":
    aisp.main(get_benchmark)
