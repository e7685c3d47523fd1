"""Baseline CUTLASS GEMM: CUTLASS 2.x's SIMT GEMM (CUDA cores) in bf16.

Baseline: C = A @ B, 8,192^3 bf16 with fp32 accumulation (1.1 TFLOP), ``cutlass::gemm::device::Gemm``
with ``OpClassSimt`` (cutlass_simt.cu): CUTLASS's default SIMT tiling (128 x 128 x 8 block tiles,
32 x 64 warp tiles, double-buffered shared memory, one-element global loads: the SIMT default
alignment), FMAs on the CUDA cores. Same library and data as the optimized side; what changes is
the operator class (SIMT -> tensor cores) and the template generation (2.x -> 3.x for sm_90a).
Optimized (optimized_cutlass_gemm.py): CUTLASS 3.x for sm_90a built by ``CollectiveBuilder``: TMA
loads into a multi-stage ring, wgmma tensor cores, warp-specialized cooperative schedule, 2 x 1
cluster, persistent tile scheduler, TMA-store epilogue.
Needs the CUTLASS headers: ``pip install nvidia-cutlass`` (6.4 MB wheel) or
``CUTLASS_DIR``; skipped with the reason otherwise. First build: about 20 s (SIMT) and 2-4 min
(sm90) of nvcc, cached in ~/.cache/aisp/native afterwards.
Expect (measured, H200, 2026-11-23): 20.7x [20.6, 20.8]: CUTLASS 2.x SIMT 30.70 ms (35.8 TFLOP/s,
CUDA cores), CUTLASS 3.x sm90 1.49 ms (737 TFLOP/s, 94% of the 783 TFLOP/s bf16 tensor-core rate).
CPU: not run (CUDA C++).
Run: python ch09/baseline_cutlass_gemm.py  |  aisp bench run -t ch09:cutlass_gemm
"""

from __future__ import annotations

import ch09_native
import torch
from baseline_register_tiling import GemmWorkload, NativeGemm, gemm_workload

import aisp
from aisp.kits import cutlass

WORKLOAD = gemm_workload(GemmWorkload(m=8192, n=8192, k=8192), 2, "bf16",
                         requires=ch09_native.cutlass_requirements(), timeout_s=900.0)


class CutlassSimtGemm(NativeGemm):
    workload = WORKLOAD
    library = ch09_native.cutlass_library("cutlass_simt.cu", hopper_only=False)
    entry = "cutlass_simt_gemm"
    dtype = torch.bfloat16
    bound = 1e-2

    def prepare(self) -> None:
        cutlass.check_headers(self.lib, self.library)


def get_benchmark() -> aisp.Benchmark:
    return CutlassSimtGemm()


if __name__ == "__main__":
    aisp.main(get_benchmark)
