"""Optimized register tiling, software-pipelined: reg_tiled's 8 x 8 outputs per thread, with the waits hidden.

Baseline (baseline_register_tiling.py): 32 x 32 shared-memory tiles, one output per thread: two
shared-memory loads per FMA.
Optimized: ``pipelined<1>`` (tiled_gemm.cu), the same 128 x 128 x 8 tiles, 256 threads and 8 x 8
register block as optimized_register_tiling.py (``reg_tiled``, 74% of the FFMA rate, its loop
already 90% FFMA: 512 of 569 SASS instructions), reorganised for what the profile left: stalls
at its two barriers a slab and on shared loads issued just before their FMAs, with only 4 warps a
scheduler to cover them. Here (1) two shared-memory buffers: the next slab is stored into the idle
one, so one __syncthreads per slab, not two; (2) two fragment sets in registers: the operands of
k + 1 are loaded while the 64 FFMAs of k issue (and those of the next slab's first k right after
its barrier); (3) each warp a 4 x 8 grid of threads: a 128-bit load of A reads 64 contiguous bytes,
of B 128, one shared-memory wavefront each (reg_tiled: 1 and 2). 128 registers, no spills: two
blocks an SM as before. Same k order, same fmaf: bit for bit reg_tiled's result.
Expect: not yet measured. Estimate (arithmetic, not a measurement): the loop stays 90.0% FFMA
(nvcc 13.0, sm_90), so the gain is only the stall cycles removed; if issue rises from ~80% of
cycles toward ~88%, 2.94 ms -> ~2.7 ms (~51 TFLOP/s, ~80% of the 62.8 TFLOP/s FFMA rate).
Run: python ch09/optimized_register_tiling_pipelined.py  |  aisp bench run -t ch09:register_tiling
"""

from __future__ import annotations

from baseline_register_tiling import NativeGemm

import aisp


class PipelinedGemm(NativeGemm):
    entry = "pipelined_gemm_f32"


def get_benchmark() -> aisp.Benchmark:
    return PipelinedGemm()


if __name__ == "__main__":
    aisp.main(get_benchmark)
