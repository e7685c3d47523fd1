"""Optimized loop unrolling (CUDA C++): the term count known at compile time, the loop fully unrolled.

Baseline (baseline_loop_unrolling.py): a runtime term count; one coefficient load (LDG) per FMA
plus loop bookkeeping, so the load/store unit, not the FMA units, sets the pace.
Optimized: ``horner_fixed`` (horner_unroll.cu) evaluates the same 256 terms with ``#pragma unroll``
over a compile-time count: every table index is a constant, so each coefficient becomes the FFMA's
immediate operand; the SASS is 256 FFMAs in a row, no loads, no branches.
Expect: 3.32x [3.31, 3.32] measured on an H200 (1.105 -> 0.333 ms), 51.6 TFLOP/s: 77% of the FP32 FMA peak.
Run: python ch08/optimized_loop_unrolling.py  |  aisp bench run -t ch08:loop_unrolling
"""

from __future__ import annotations

from baseline_loop_unrolling import RuntimeHorner

import aisp


class UnrolledHorner(RuntimeHorner):
    mode = 1


def get_benchmark() -> aisp.Benchmark:
    return UnrolledHorner()


if __name__ == "__main__":
    aisp.main(get_benchmark)
