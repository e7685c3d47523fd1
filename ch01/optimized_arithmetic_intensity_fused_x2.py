"""Optimized arithmetic intensity, fused, two float4 per thread (CUDA C++): the fused pass with more bytes in flight.

Baseline (baseline_arithmetic_intensity.py): 8 passes, one float per thread, 92 bytes and
16 FLOPs per element (0.17 FLOP/byte).
Optimized: optimized_arithmetic_intensity_fused.py's one pass (read x once, all 8 Horner steps in
registers, write y once: 8 bytes per element) with each thread loading two float4s of x, a block
apart, before it computes or stores either (arithmetic_intensity.cu ``pass_float4x2``): 32 bytes in
flight per thread and 64 KiB per SM instead of 16 and 32 KiB, through half as many blocks. The fused
kernel's one float4 per thread is about what Little's law asks at ~1 us of loaded latency, and
ch06:block_size measured the same step there (16 -> 128 KiB an SM: 79% -> 100% of the HBM copy).
Same fmaf chain in the same order: bitwise the fused kernel's result.
Expect: not yet measured. Estimate (arithmetic, not a measurement): the fused call takes 23-24 us for
80 MB (79.8-82.1% of the 19.2 us HBM bound, H200, 2026-11-29); at the rate of block_size's float4
variant the same bytes take ~19 us plus ~1.5-2.5 us of ramp and tail: 20.5-22 us, 87-94%; a tie if
the ramp and tail of one short kernel, not the bytes in flight, are the missing 20%.
Run: python ch01/optimized_arithmetic_intensity_fused_x2.py  |  aisp bench run -t ch01:arithmetic_intensity
"""

from __future__ import annotations

from baseline_arithmetic_intensity import Polynomial

import aisp


class FusedPolynomialX2(Polynomial):
    variant = 5


def get_benchmark() -> aisp.Benchmark:
    return FusedPolynomialX2()


if __name__ == "__main__":
    aisp.main(get_benchmark)
