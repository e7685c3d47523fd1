"""Baseline loop unrolling (CUDA C++): a 256-term polynomial per element with a runtime term count.

Baseline: y = P(clamp(x, -1, 1)) on 32M fp32 elements, P = sum_k (-1)^k x^k / (k + 1) by Horner's
rule (horner_unroll.cu, ``horner_runtime``). The term count is a kernel argument, so the compiler
unrolls the loop only partly: every FMA comes with a load of its coefficient from the table (LDG,
an L1 hit), and every 16 FMAs with a counter update, a compare and a branch. The load/store unit
issues far fewer instructions per clock than the FMA units, so the loads, not the FMAs, set the pace.
Optimized (optimized_loop_unrolling.py): the term count as a template argument and ``#pragma
unroll``: each coefficient folds into its FFMA as an immediate, one instruction per FMA.
Same table, same FMAs in the same order: bitwise-equal results. 17.2 GFLOP per call, 256 MiB moved.
Expect: 3.32x [3.31, 3.32] measured on an H200 (1.105 -> 0.333 ms); the optimized at 51.6 TFLOP/s, 77% of
the FP32 FMA peak (~67 TFLOP/s), 101% of cuBLAS SGEMM's 51 (baseline 15.5 TFLOP/s).
Run: python ch08/baseline_loop_unrolling.py  |  aisp bench run -t ch08:loop_unrolling
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch08_common import BITWISE, INT, LONG, PTR, bind, call, library, series, unit_uniform

import aisp
from aisp.kits import native


@dataclass(frozen=True, kw_only=True)
class HornerWorkload(aisp.Workload):
    n: int = 1 << 25
    terms: int = 256


def _workload() -> HornerWorkload:
    s = HornerWorkload()
    return HornerWorkload(flops=2.0 * s.terms * s.n, bytes=8.0 * s.n, items=s.n, item_unit="elements",
                          # fp32_simt: per-element FFMA chains on the CUDA cores, no tensor-core form; bitwise-equal: zero tolerance
                          precision="fp32_simt", **BITWISE, requires=native.REQUIRES,
                          ceiling_note="FFMA-bound: 86% of simt_fp32 (62.8 TFLOP/s) in the 4 x H200 book run, 101% of cuBLAS SGEMM; not profiled")


WORKLOAD = _workload()
LIBRARY = library("horner_unroll.cu")


class RuntimeHorner(aisp.Benchmark):
    """y = P(x), the term count passed at run time."""

    workload = WORKLOAD
    inputs = ("x",)
    scratch = ("y",)
    mode = 0
    """0: runtime term count, 1: compile-time term count (horner_unroll.cu)."""

    def setup(self) -> None:
        w = self.workload
        self.run_fn = bind(LIBRARY.load(self.device), "horner_run", [INT, PTR, PTR, INT, LONG, PTR])
        self.x = unit_uniform(w.n, self.generator(), self.device)
        self.y = torch.empty_like(self.x)
        sample = slice(0, 1 << 20)
        torch.testing.assert_close(self.run()[sample].double(), series(self.x[sample], w.terms),
                                   rtol=1e-5, atol=1e-5)

    def run(self) -> torch.Tensor:
        w = self.workload
        call(self.run_fn, self.mode, self.x.data_ptr(), self.y.data_ptr(), w.terms, w.n, native.stream(self.device))
        return self.y


def get_benchmark() -> aisp.Benchmark:
    return RuntimeHorner()


if __name__ == "__main__":
    aisp.main(get_benchmark)
