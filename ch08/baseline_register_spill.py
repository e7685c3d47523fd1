"""Baseline register spill (CUDA C++): a per-thread ring buffer indexed at run time lives in local memory.

Baseline: a 32-tap FIR filter down the columns of an 8,223 x 8,192 fp32 matrix, y[r][c] = sum_j
taps[j] * x[r+j][c] (256 MiB in, 256 MiB out). One thread per column strip of 128 output rows keeps
the last 32 inputs of its column in ``float ring[32]`` indexed with ``(r + j) % 32`` (fir_spill.cu,
``fir_ring``), so every input is loaded from DRAM once. Registers cannot be indexed at run time: the
compiler places the array in local memory (LDL/STL in the SASS; ``STACK:64`` in ``cuobjdump
-res-usage``): 31 local loads and a local store through L1 per output, 32x the global
traffic, more than L1 holds for 2,048 threads (128 B each).
Optimized (optimized_register_spill.py): the strip loop unrolled by 32, so every ring index is a
compile-time constant and the window lives in 32 registers: no LDL/STL; each row loaded 8 outputs
ahead of its use. Same loads from DRAM, same FMAs in the same order: bitwise-equal results. 4.3 GFLOP, 512 MiB per call: memory-bound.
Expect: measured, H200, 2026-11-29, with the optimized's 8-row lookahead, twice: 3.33x and 3.37x
(0.544 -> 0.164 and 0.1615 ms); the optimized at 3.3 TB/s, 78-79% of the HBM copy bandwidth (0.183
ms, 70% without it; baseline 0.96 TB/s, 23%).
Run: python ch08/baseline_register_spill.py  |  aisp bench run -t ch08:register_spill
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch08_common import INT, PTR, bind, call, library

import aisp
from aisp.kits import native


@dataclass(frozen=True, kw_only=True)
class FirWorkload(aisp.Workload):
    rows: int = 8192
    """Output rows; the input has rows + taps - 1."""
    cols: int = 8192
    taps: int = 32
    strip: int = 128
    """Output rows per thread."""


def _workload() -> FirWorkload:
    s = FirWorkload()
    moved = 4.0 * ((s.rows + s.taps - 1) * s.cols + s.rows * s.cols)
    return FirWorkload(flops=2.0 * s.taps * s.rows * s.cols, bytes=moved, items=s.rows * s.cols,
                       item_unit="outputs", precision="exact", requires=native.REQUIRES,
                       ceiling_note="ncu (H200): fir_shift 155.5 us at 3.40 TB/s (85% of HBM copy; the declared bytes), L2 82%, long_scoreboard 8.2; ~6 us launch in the call")


WORKLOAD = _workload()
LIBRARY = library("fir_spill.cu")


def fir_reference(x: torch.Tensor, taps: torch.Tensor, rows: int) -> torch.Tensor:
    """sum_j taps[j] * x[j:j + rows] in float64."""
    x64, t64 = x.double(), taps.double().tolist()
    return sum(t * x64[j:j + rows] for j, t in enumerate(t64))


class RingBufferFir(aisp.Benchmark):
    """A column FIR filter with a runtime-indexed per-thread window."""

    workload = WORKLOAD
    inputs = ("x",)
    scratch = ("y",)
    mode = 0
    """0: ring buffer in local memory, 1: unrolled window in registers (fir_spill.cu)."""
    strip = WORKLOAD.strip
    """Output rows per thread (a multiple of 32 that divides the rows)."""

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        self.run_fn = bind(LIBRARY.load(self.device), "fir_run", [INT, PTR, PTR, PTR, INT, INT, INT, PTR])
        self.x = torch.randn(w.rows + w.taps - 1, w.cols, generator=gen, device=self.device)
        self.taps = torch.randn(w.taps, generator=gen, device=self.device).cpu() / w.taps
        self.y = torch.empty(w.rows, w.cols, device=self.device)
        got = self.run()[:, :256].double()
        torch.testing.assert_close(got, fir_reference(self.x[:, :256], self.taps, w.rows), rtol=1e-5, atol=1e-5)

    def run(self) -> torch.Tensor:
        w = self.workload
        call(self.run_fn, self.mode, self.x.data_ptr(), self.y.data_ptr(), self.taps.data_ptr(), w.rows, w.cols,
             self.strip, native.stream(self.device))
        return self.y


def get_benchmark() -> aisp.Benchmark:
    return RingBufferFir()


if __name__ == "__main__":
    aisp.main(get_benchmark)
