"""Optimized tiled matmul, CUTLASS variant: the chapter's cp.async ring and register tiles as CUTLASS's
SIMT GEMM builds them, larger.

Baseline (baseline_tiled_matmul.py): one output per thread, two global loads per FMA.
Optimized: aisp/kits/cutlass_sgemm.cu (``aisp.kits.cutlass.SGEMM``, shared with ch09:register_tiling's
_cutlass variant), ``cutlass::gemm::device::Gemm`` for fp32 with ``OpClassSimt``. It builds what _async
and _paired build by hand: k-slices copied by cp.async into a ring of shared-memory stages while an
earlier one is multiplied, a block of C held in registers, each warp's lanes on a 4 x 8 patch so
neighbouring lanes share their 128-bit operand loads. Each piece is larger: 128 x 256 block tiles of
256 threads, 64 x 64 warp tiles, 16 x 8 outputs a thread (128 accumulators against _paired's 64: twice
the FFMAs per operand read from shared memory, where _async's profile left FFMA and LDS sharing the
issue slots), a 4-stage ring of 8-deep slices against 2. Cost: 254 registers, one block an SM
(_paired: 127, two). At this shape: 32 x 16 = 512 blocks, 3.88 waves on an H200's 132 SMs, as at
ch09's 4,096^3 (same m and n, half the k). Each output's 2,048 products are summed in k order by FFMA
from zero, as in the chapter's kernels, so C should equal theirs bit for bit (read from CUTLASS's
source, not yet checked on a GPU; setup checks it against fp64 as every variant's, the GPU test
against the baseline's to 1e-5).
Expect: from a standalone sweep on an H200 (2026-11-30, 20 calls, medians, CUDA events; not yet a
harness run): 1.3625 ms (1.3689 in an earlier sweep), 50.4 TFLOP/s, 80.3% of the measured FFMA rate
(``simt_fp32``, 62.8 TFLOP/s: the ceiling time is 1.094 ms and 80% of it is 1.368 ms, so a harness run
may land either side); cuBLAS SGEMM 1.3543 ms in that sweep; the pair's stored best, _paired, 1.523 ms
(71.9%).
Needs the CUTLASS headers (nvidia-cutlass wheel or CUTLASS_DIR; the first call builds it, ~60 s of
nvcc); without them the variant is skipped with a reason naming the wheel.
Run: python ch07/optimized_tiled_matmul_cutlass.py  |  aisp bench run -t ch07:tiled_matmul
"""

from __future__ import annotations

import dataclasses

import torch
from baseline_tiled_matmul import WORKLOAD, NaiveMatmul
from ch07_common import INT, PTR

import aisp
from aisp.kits import cutlass, native

LIBRARY = cutlass.SGEMM
"""aisp/kits/cutlass_sgemm.cu, shared with ch09 (whose CPU test checks its SASS: tiles, cp.async, no spills)."""


class CutlassMatmul(NaiveMatmul):
    workload = dataclasses.replace(WORKLOAD, requires=cutlass.requirements(), timeout_s=900.0)

    def setup(self) -> None:
        self.sgemm = LIBRARY.load(self.device, {"cutlass_sgemm": [PTR, PTR, PTR, INT, INT, INT, PTR]})
        cutlass.check_headers(self.sgemm, LIBRARY)
        super().setup()  # the baseline's inputs, and this run()'s C checked against fp64

    def run(self) -> torch.Tensor:
        w = self.workload
        status = self.sgemm.cutlass_sgemm(native.ptr(self.a), native.ptr(self.b), native.ptr(self.c),
                                          w.m, w.n, w.k, native.stream(self.device))
        native.check(status, "cutlass_sgemm (1 cannot implement, 4 run)")
        return self.c


def get_benchmark() -> aisp.Benchmark:
    return CutlassMatmul()


if __name__ == "__main__":
    aisp.main(get_benchmark)
