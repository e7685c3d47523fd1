"""Baseline tail effect (CUDA C++): one block per tile, 265 tiles, 264 blocks resident: a second wave of one.

Baseline: y = P(clamp(x, -1, 1)) (the 128-term series, compute-bound) over 265 tiles of 1,024 x 128
fp32 elements, one 1,024-thread block per tile (tail_waves.cu, ``tile_blocks``), the launch one
writes first. Two such blocks fit on an SM, so an H100/H200 (132 SMs) runs 264 in a first wave and
the 265th alone in a second wave on one SM while 131 idle: ~1.5 waves of time for 1.004 waves
of work (a lone block has its SM to itself, so it takes about half a wave).
Optimized (optimized_tail_effect.py): a persistent grid of SMs x resident blocks (from the occupancy
API: 264) striding over the same work in groups of 4 units of 1,024 elements: every block gets 1/264
of it, one wave. Both run the same body (``eval_groups``): 4 units' FMA chains a step, so 512 of the
loop's 540-541 SASS instructions are FFMA (was 128 of 142-145 a unit), and the next step's loads go
out before this step's chains. Same FMAs per element: bitwise-equal results. 8.9 GFLOP per call,
265 MiB moved.
Expect: measured, H200, 2026-11-29, the 4-unit body: 1.44x [1.43, 1.44] (0.2242 -> 0.1563 ms); the
optimized at 56.9 TFLOP/s, 90.6% of the measured FFMA rate (62.8 TFLOP/s; one unit a step: 76%).
On a GPU with another SM count the tail is another size.
Run: python ch08/baseline_tail_effect.py  |  aisp bench run -t ch08:tail_effect
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from ch08_common import BITWISE, INT, PTR, bind, call, int_out, library, series, unit_uniform

import aisp
from aisp.kits import native


@dataclass(frozen=True, kw_only=True)
class TailWorkload(aisp.Workload):
    tiles: int = 265
    """132 SMs x 2 resident blocks + 1: one wave and one block on an H100/H200."""
    units_per_tile: int = 128
    """Units of 1,024 elements (one per thread) per tile."""
    terms: int = 128

    @property
    def n(self) -> int:
        return self.tiles * self.units_per_tile * 1024


def _workload() -> TailWorkload:
    s = TailWorkload()
    return TailWorkload(flops=2.0 * s.terms * s.n, bytes=8.0 * s.n, items=s.n, item_unit="elements",
                        # fp32_simt: per-element FFMA chains on the CUDA cores, no tensor-core form; bitwise-equal: zero tolerance
                        precision="fp32_simt", **BITWISE, requires=native.REQUIRES,
                        ceiling_note="profiled (ncu, H200, one unit a step): 183 us, SMs active 97.5%, issue 84.5%, FMA pipe 74.5%; the 4-unit body reads 91%")


WORKLOAD = _workload()
LIBRARY = library("tail_waves.cu")


class PerTileBlocks(aisp.Benchmark):
    """One block per tile."""

    workload = WORKLOAD
    inputs = ("x",)
    scratch = ("y",)
    mode = 0
    """0: one block per tile, 1: a persistent grid (tail_waves.cu)."""

    def setup(self) -> None:
        w = self.workload
        lib = LIBRARY.load(self.device)
        self.run_fn = bind(lib, "tail_run", [INT, PTR, PTR, INT, INT, INT, PTR])
        self.grid = int_out(bind(lib, "tail_persistent_grid", [PTR]))
        self.x = unit_uniform(w.n, self.generator(), self.device)
        self.y = torch.empty_like(self.x)
        sample = slice(w.n - (1 << 20), w.n)
        torch.testing.assert_close(self.run()[sample].double(), series(self.x[sample], w.terms),
                                   rtol=1e-5, atol=1e-5)

    def run(self) -> torch.Tensor:
        w = self.workload
        call(self.run_fn, self.mode, self.x.data_ptr(), self.y.data_ptr(), w.tiles, w.units_per_tile,
             self.grid, native.stream(self.device))
        return self.y

    def metrics(self) -> dict[str, float]:
        blocks = self.grid if self.mode else self.workload.tiles
        return {"blocks": float(blocks), "waves": float(math.ceil(blocks / self.grid))}


def get_benchmark() -> aisp.Benchmark:
    return PerTileBlocks()


if __name__ == "__main__":
    aisp.main(get_benchmark)
