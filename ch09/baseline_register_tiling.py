"""Baseline register tiling: a shared-memory tiled fp32 GEMM, one output element per thread.

Baseline: C = A @ B, 4,096^3 fp32 (137 GFLOP), ``smem_tiled_f32`` (tiled_gemm.cu): 32 x 32 tiles of A
and B staged in shared memory, 1,024 threads per block, each accumulating one element of C. Every
FMA reads two 4-byte shared-memory words (one a broadcast): 0.25 FLOP per shared byte, so against
~33 TB/s of shared memory it sits on the shared-memory roof (~8 TFLOP/s), far under the FP32 FMA
peak (~67 TFLOP/s on an H100/H200). (Chapter 7's tiled_matmul takes the same step from global
memory; here it is the roofline one level up.)
Optimized (optimized_register_tiling.py): ``reg_tiled<float>``: each thread keeps an 8 x 8 block of
C in registers and, per k, reads 8 + 8 operands with four 128-bit shared loads for 64 FMAs (2 FLOPs
per shared byte: the FMA roof binds); the next k-slab is loaded from global memory while the
current one is multiplied.
Both add the products in the same k order with FMA: results equal to the last bit or nearly so.
Expect (measured, H200, 2026-11-23): 5.3x [5.25, 5.28]: 32x32 shared-memory tiles 15.48 ms (8.9
TFLOP/s, on the shared-memory roof), 8x8 register tiles 2.94 ms (46.7 TFLOP/s, 91% of cuBLAS SGEMM's
51 TFLOP/s, 70% of the ~67 TFLOP/s FMA peak). CPU: not run (CUDA C++).
Run: python ch09/baseline_register_tiling.py  |  aisp bench run -t ch09:register_tiling
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import ch09_native
import torch

import aisp
from aisp.kits import native

INT, PTR = ctypes.c_int, ctypes.c_void_p


@dataclass(frozen=True, kw_only=True)
class GemmWorkload(aisp.Workload):
    m: int = 4096
    n: int = 4096
    k: int = 4096


def gemm_workload(shape: GemmWorkload, element_bytes: int, precision: str, **kw: object) -> GemmWorkload:
    """FLOPs 2mnk; bytes: A and B read and C written once."""
    s = shape
    return GemmWorkload(m=s.m, n=s.n, k=s.k, flops=2.0 * s.m * s.n * s.k,
                        bytes=float(element_bytes * (s.m * s.k + s.k * s.n + s.m * s.n)), items=1,
                        item_unit="GEMMs", precision=precision, **kw)


# fp32_simt: a CUDA-core GEMM (FFMA, tests/test_ch09_cuda.py reads its SASS), priced at aisp peak's FFMA
# rate (simt_fp32, 62.8 TFLOP/s on an H200), not at cuBLAS SGEMM's 51.2 (matmul_fp32): that is one FFMA
# GEMM's result, not the pipes' ceiling, and the register-tiled kernel read 92% of it. Same tolerance (fp32).
WORKLOAD = gemm_workload(GemmWorkload(), 4, "fp32_simt", requires=native.REQUIRES,
                         ceiling_note="ncu (H200): reg_tiled 2,915 us, SM 78.7%, 2 blocks an SM (occupancy 24%), stalls low "
                                      "(not_selected 1.9): the issue slots FFMAs share with LDS and addressing")


class NativeGemm(aisp.Benchmark):
    """C = A @ B through an exported ``fn(a, b, c, m, n, k, stream)`` of a native library."""

    workload = WORKLOAD
    inputs = ("a", "b")
    scratch = ("c",)
    library = ch09_native.TILED
    entry = "smem_gemm_f32"
    dtype = torch.float32
    bound = 1e-5
    """Relative L2 error allowed against torch.matmul in fp32 (setup's check)."""

    def setup(self) -> None:
        w, gen, dev = self.workload, self.generator(), self.device
        self.lib = self.library.load(dev)
        self.fn = getattr(self.lib, self.entry)
        self.fn.argtypes = [PTR, PTR, PTR, INT, INT, INT, PTR]
        self.a = torch.randn(w.m, w.k, generator=gen, device=dev).to(self.dtype)
        self.b = torch.randn(w.k, w.n, generator=gen, device=dev).to(self.dtype)
        self.c = torch.empty(w.m, w.n, device=dev, dtype=self.dtype)
        self.prepare()
        ch09_native.check_gemm(self.run().clone(), self.a, self.b, self.bound, type(self).__name__)

    def prepare(self) -> None:
        """What a variant builds once before its first call (a cuBLASLt plan)."""

    def run(self) -> torch.Tensor:
        w = self.workload
        status = self.fn(self.a.data_ptr(), self.b.data_ptr(), self.c.data_ptr(), w.m, w.n, w.k,
                         native.stream(self.device))
        native.check(status, f"{type(self).__name__} ({self.entry})")
        return self.c


def get_benchmark() -> aisp.Benchmark:
    return NativeGemm()


if __name__ == "__main__":
    aisp.main(get_benchmark)
