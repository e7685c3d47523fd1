"""Baseline transpose (CUDA C++): out = in^T for an 8192 x 16384 fp32 matrix, the naive kernel.

Baseline: 32x8 threads per 32x32 tile, 4 elements per thread (transpose.cu, ``transpose_naive``):
reads rows of ``in`` (coalesced) and writes columns of ``out``: every warp-wide store touches 32
rows, 32 sectors carrying 4 useful bytes each; L2 merges some, DRAM still moves far more than 1 GiB.
Optimized: optimized_transpose_tiled.py stages each tile in shared memory so both the reads and the
writes are coalesced rows, but reading a tile column is a 32-way bank conflict;
optimized_transpose_padded.py pads the tile rows to 33 floats, so a column spans all 32 banks.
Same bytes requested (512 MiB read, 512 MiB written), same result, exactly.
Expect (measured, H200): naive 1.93 ms (558 GB/s, 13% of the HBM copy); tiled 0.669 ms, 2.88x
[2.87, 2.89] (1,604 GB/s, 38%); padded 0.313 ms, 6.16x [6.13, 6.19] (3,435 GB/s, 81%). H100: not measured.
Run: python ch07/baseline_transpose.py  |  aisp bench run -t ch07:transpose
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch07_common import INT, PTR, library

import aisp
from aisp.kits import native
from aisp.kits.native import ptr


@dataclass(frozen=True, kw_only=True)
class TransposeWorkload(aisp.Workload):
    rows: int = 8192
    cols: int = 16384


def _transpose_workload() -> TransposeWorkload:
    s = TransposeWorkload()
    return TransposeWorkload(bytes=8.0 * s.rows * s.cols, items=s.rows * s.cols, item_unit="elements",
                             precision="exact", requires=native.REQUIRES)


WORKLOAD = _transpose_workload()
LIBRARY = library("transpose.cu")


class NaiveTranspose(aisp.Benchmark):
    """out (cols x rows) = x (rows x cols) transposed."""

    workload = WORKLOAD
    inputs = ("x",)
    scratch = ("out",)
    mode = 0
    """transpose.cu: 0 naive, 1 shared-memory tile, 2 padded tile."""

    def setup(self) -> None:
        w = self.workload
        self.lib = LIBRARY.load(self.device, {"transpose_run": [INT, PTR, PTR, INT, INT, PTR]})
        self.x = torch.randn(w.rows, w.cols, device=self.device, generator=self.generator())
        self.out = torch.empty(w.cols, w.rows, device=self.device)
        torch.testing.assert_close(self.run(), self.x.t(), rtol=0, atol=0)

    def run(self) -> torch.Tensor:
        w = self.workload
        status = self.lib.transpose_run(self.mode, ptr(self.x), ptr(self.out), w.rows, w.cols,
                                        native.stream(self.device))
        native.check(status, type(self).__name__)
        return self.out


def get_benchmark() -> aisp.Benchmark:
    return NaiveTranspose()


if __name__ == "__main__":
    aisp.main(get_benchmark)
