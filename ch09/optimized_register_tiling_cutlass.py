"""Optimized register tiling, CUTLASS variant: the same register tiling as CUTLASS's SIMT GEMM builds it.

Baseline (baseline_register_tiling.py): 32 x 32 shared-memory tiles, one output per thread: two
shared-memory loads per FMA, on the shared-memory roof (8.9 TFLOP/s).
Optimized (optimized_register_tiling.py): ``reg_tiled<float>``, 8 x 8 outputs a thread in 128 x 128 tiles:
2.92 ms stored, 75% of the FFMA rate (62.8 TFLOP/s); profiled, it issues nearly every cycle it can and
three rewrites of its loop did not move it (README section 4).
Optimized here: aisp/kits/cutlass_sgemm.cu (shared with ch07:tiled_matmul; ``aisp.kits.cutlass.SGEMM``),
``cutlass::gemm::device::Gemm`` for fp32 with ``OpClassSimt``: the same idea, larger. Each thread holds a
16 x 8 block of C (128 accumulators against reg_tiled's 64; 254 registers, one 256-thread block an SM),
each warp a 64 x 64 tile, the block a 128 x 256 tile, and a 4-stage ``cp.async`` ring of 8-deep k-slabs
keeps slabs in flight while one is multiplied. Its sm_90 SASS: 1,152 FFMA, 54 LDS.128 and 279 32-bit LDS
(the epilogue's pass through shared memory among them), 48 LDGSTS, no local memory. Why it issues FFMAs
faster than reg_tiled was not profiled; the larger register tile, twice the FFMAs per operand loaded, is
the main difference.
How it was chosen (2 x H200 host, 2026-11-30, 20 calls each, medians, one GPU, CUDA events): 27 CUTLASS
configurations at 4,096^3: 128 x 128 tiles (CUTLASS's default) 3.08-3.45 ms, 128 x 256 / 256 x 128 with
64 x 64 warps 2.70-2.79 ms (2 stages 2.79, 3-5 stages 2.70), 128 x 128 with 64 x 64 warps and 64 x 256
with 32 x 64 warps 2.95-2.97, a stream-K form (GemmUniversal) 2.72-2.73; cuBLAS SGEMM (torch, TF32 off) 2.675 ms and reg_tiled 2.911 in the same runs.
Expect: measured by the harness (one H200 of a 2 x H200 host, 2026-11-30, two runs of 20 samples, stored):
2.7062 and 2.7158 ms, 50.8 / 50.6 TFLOP/s, 80.9% and 80.6% of the FFMA rate, 5.70x [5.68, 5.73] over the
15.45 ms baseline; reg_tiled 2.9175 / 2.9202 ms (75.0%) in the same runs; in the sweep 2.7013 ms (cuBLAS
51.4 TFLOP/s, 82%), its C equal to torch.matmul's bit for bit (setup checks every variant of the pair
against torch.matmul, relative L2 error under 1e-5).
Needs the CUTLASS headers (nvidia-cutlass wheel or CUTLASS_DIR; the first call builds it, ~60 s of nvcc).
Run: python ch09/optimized_register_tiling_cutlass.py  |  aisp bench run -t ch09:register_tiling
"""

from __future__ import annotations

import dataclasses

from baseline_register_tiling import WORKLOAD, NativeGemm

import aisp
from aisp.kits import cutlass


class CutlassSimtSgemm(NativeGemm):
    workload = dataclasses.replace(WORKLOAD, requires=cutlass.requirements(), timeout_s=900.0)
    library = cutlass.SGEMM
    entry = "cutlass_sgemm"

    def prepare(self) -> None:
        cutlass.check_headers(self.lib, self.library)


def get_benchmark() -> aisp.Benchmark:
    return CutlassSimtSgemm()


if __name__ == "__main__":
    aisp.main(get_benchmark)
