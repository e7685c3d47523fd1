"""Baseline half2 math (CUDA C++): fp16 data, fp32 arithmetic: two FFMA chains per pair of elements.

Baseline: y = P(clamp(x, -1, 1)) on 64M fp16 elements (P the 128-term series of ch08_poly.cuh), each
thread loading one __half2 (two neighbours), converting both to float and running two chains of 128
FFMAs (half2_poly.cu, ``poly_fp32``): the usual way to compute on fp16 data, full fp32 accuracy, one
rounding to fp16 at the end. 256 FMA instructions per thread: compute-bound at the FP32 rate.
Optimized (optimized_half2_math.py): the pair stays packed; one chain of 128 ``__hfma2`` (HFMA2),
each instruction two fp16 FMAs: half the instructions, and Hopper issues HFMA2 at the FFMA rate, so
twice the FLOP/s (fp16 SIMT peak ~134 TFLOP/s on an H100 SXM, 2x fp32).
Tolerance: fp16 math rounds at every step. An fp16 emulation on a CPU (one rounding per FMA, fp16
coefficients) differs from the fp32 path by at most 1.0e-3 relative, 3.3e-4 relative L2: inside
the harness's fp16 defaults (rtol 1e-2, L2 5e-3). 17.2 GFLOP per call, 256 MiB moved.
Expect: 1.13x [1.12, 1.13] measured on an H200 (0.342 -> 0.303 ms), not the ~2x estimated: the optimized
at 56.7 TFLOP/s, 42% of the fp16 SIMT peak (2x fp32; baseline 50.3 TFLOP/s of fp32 math).
Run: python ch08/baseline_half2_math.py  |  aisp bench run -t ch08:half2_math
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch08_common import INT, LONG, PTR, bind, call, library, series, unit_uniform

import aisp
from aisp.kits import native


@dataclass(frozen=True, kw_only=True)
class Half2Workload(aisp.Workload):
    n: int = 1 << 26
    terms: int = 128


def _workload() -> Half2Workload:
    s = Half2Workload()
    return Half2Workload(flops=2.0 * s.terms * s.n, bytes=4.0 * s.n, items=s.n, item_unit="elements",
                         # fp16_simt: the best variant's packed HFMA2 chain bounds the pair (the baseline's FFMAs on
                         # fp16 data peak at half that rate); a per-element polynomial has no tensor-core form
                         precision="fp16_simt", requires=native.REQUIRES,
                         ceiling_note="ncu (H200): _ilp 182 us, SM 77%, MMA pipe 73% (HFMA2.MMA), top stall math_pipe_throttle: "
                                      "ptxas runs the MMA-pipe chains first, then the FMA ones")


WORKLOAD = _workload()
LIBRARY = library("half2_poly.cu")


class Fp32MathOnHalf(aisp.Benchmark):
    """y = P(x) for fp16 x, computed in fp32."""

    workload = WORKLOAD
    inputs = ("x",)
    scratch = ("y",)
    mode = 0
    """0: fp32 math, 1: packed __half2 math, 2: packed, 4 chains a thread (half2_poly.cu; 3 was the removed
    pinned-chains kernel, refused now)."""

    def setup(self) -> None:
        w = self.workload
        self.run_fn = bind(LIBRARY.load(self.device), "half2_run", [INT, PTR, PTR, LONG, PTR])
        self.x = unit_uniform(w.n, self.generator(), self.device, torch.float16)
        self.y = torch.empty_like(self.x)
        sample = slice(0, 1 << 20)
        torch.testing.assert_close(self.run()[sample].double(), series(self.x[sample], w.terms),
                                   rtol=2e-3, atol=2e-3)

    def run(self) -> torch.Tensor:
        call(self.run_fn, self.mode, self.x.data_ptr(), self.y.data_ptr(), self.workload.n,
             native.stream(self.device))
        return self.y


def get_benchmark() -> aisp.Benchmark:
    return Fp32MathOnHalf()


if __name__ == "__main__":
    aisp.main(get_benchmark)
