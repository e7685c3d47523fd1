"""Baseline cuBLASLt GEMM: a register-tiled bf16 CUDA GEMM on the CUDA cores, data on the device.

Baseline: C = A @ B, 8,192^3 bf16 (1.1 TFLOP), ``reg_tiled<__nv_bfloat16>`` (tiled_gemm.cu), the
register-tiled kernel of register_tiling with bf16 operands widened to fp32 in shared memory and
fp32 FMAs: what a competent hand-written SIMT GEMM reaches. It cannot exceed the FP32 FMA peak
(~67 TFLOP/s), under 10% of the bf16 tensor-core rate. Inputs and output stay on the device; no
host copy is timed.
Optimized (optimized_cublaslt_gemm.py): cuBLASLt, planned once in setup() (descriptors, heuristic
algorithm choice with a 32 MiB workspace): a wgmma/TMA tensor-core kernel on Hopper.
Both accumulate in fp32 and round once to bf16; the sums' order differs (bf16 tolerance).
Expect (measured, H200, 2026-11-23): 17.7x [17.6, 17.8]: register-tiled bf16 GEMM on the CUDA cores
27.26 ms (40.3 TFLOP/s), cuBLASLt 1.54 ms (713 TFLOP/s, 91% of the 783 TFLOP/s bf16 tensor-core
rate). CPU: not run (CUDA C++).
Run: python ch09/baseline_cublaslt_gemm.py  |  aisp bench run -t ch09:cublaslt_gemm
"""

from __future__ import annotations

import torch
from baseline_register_tiling import GemmWorkload, NativeGemm, gemm_workload

import aisp
from aisp.kits import native

WORKLOAD = gemm_workload(GemmWorkload(m=8192, n=8192, k=8192), 2, "bf16", requires=native.REQUIRES)


class SimtBf16Gemm(NativeGemm):
    workload = WORKLOAD
    entry = "reg_gemm_bf16"
    dtype = torch.bfloat16
    bound = 1e-2


def get_benchmark() -> aisp.Benchmark:
    return SimtBf16Gemm()


if __name__ == "__main__":
    aisp.main(get_benchmark)
