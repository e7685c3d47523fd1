"""Optimized persistent matmul (Triton): one program per SM, each walking a queue of output tiles.

Baseline (baseline_persistent_matmul.py): 2,048 programs, one tile each; every tile pays its
pipeline fill and an epilogue with idle tensor cores.
Optimized: ``matmul_persistent`` (ch10b_triton.py) is launched with as many programs as the GPU
has SMs (132 on an H200; ``NUM_PROGRAMS`` is a compile-time constant). Program p takes tiles p,
p + 132, p + 264, ... in the same grouped order (the queue is static: tile t goes to program
t mod 132, no atomics). ``tl.range(..., flatten=True)`` fuses the tile loop with the K loop into
one software pipeline, so TMA loads for the next tile are issued while this tile's accumulator is
converted and stored (208 KiB of shared memory: 3 stages plus the C staging tile). No block
launches after the first wave, and the tensor cores see one continuous stream of K steps.
Expect (measured, H200, 2026-11-23): 0.280 → 0.262 ms, 525 TFLOP/s (67% of 783), 1.06x [1.05, 1.07]:
inside the estimated 1.05-1.2x, below the estimated 70-85% of peak (not profiled).
Run: python ch10/optimized_persistent_matmul.py  |  aisp bench run -t ch10:persistent_matmul
"""

from __future__ import annotations

from baseline_persistent_matmul import TilePerProgram

import aisp


class PersistentMatmul(TilePerProgram):
    kind = "persistent"


def get_benchmark() -> aisp.Benchmark:
    return PersistentMatmul()


if __name__ == "__main__":
    aisp.main(get_benchmark)
