"""Baseline persistent matmul (Triton): one program per output tile, tiles loaded by TMA descriptors.

Baseline: C = A @ B with M = N = 8,192, K = 1,024 in bf16 (137 GFLOP per call),
``matmul_descriptors`` in ch10b_triton.py (the optimized side of triton_tma): 2,048 programs of one
128 x 256 tile each, 3 stages, 8 warps. With 144 KiB of shared memory a program holds its SM alone,
so each SM repeats, 15-16 times, launch of a program, pipeline fill (the first stages' loads
waiting on HBM/L2 with no MMA to hide them), 16 K steps, and an epilogue (convert and TMA store
of a 64 KB tile) during which its tensor cores idle. With K = 1,024 the fill and epilogue are a
large share of each tile's ~11 us of MMA work.
Optimized (optimized_persistent_matmul.py): one program per SM walking the tile queue; the tile
and K loops are one software pipeline, so the next tile's loads overlap this tile's epilogue.
Expect (measured, H200, 2026-11-23): 0.280 ms per call, 492 TFLOP/s (63% of the 783 TFLOP/s bf16
peak).
Run: python ch10/baseline_persistent_matmul.py  |  aisp bench run -t ch10:persistent_matmul
"""

from __future__ import annotations

from ch10b_common import TritonMatmul, matmul_workload

import aisp

WORKLOAD = matmul_workload(8192, 8192, 1024)


class TilePerProgram(TritonMatmul):
    workload = WORKLOAD
    kind = "descriptors"


def get_benchmark() -> aisp.Benchmark:
    return TilePerProgram()


if __name__ == "__main__":
    aisp.main(get_benchmark)
