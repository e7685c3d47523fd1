"""Baseline DSMEM reduction (CUDA C++): a row normalization whose row spans 8 blocks, partial sums
exchanged through global memory and a second kernel.

Baseline: y = x / sqrt(mean(x^2) + 1e-6) per row of a 1,024 x 65,536 fp32 matrix (256 MB). A
row (256 KB) is more than one SM holds, so 8 blocks share it, 8,192 floats each
(dsmem_reduction.cu). ``partial_sumsq`` writes each block's sum of squares to global memory; a
second kernel, ``normalize_rows``, adds the row's 8 partials and, since the first kernel's
registers are gone, reads its chunk of x from HBM again to scale it: 768 MB of traffic
(x twice, y once) and two launches.
Optimized (optimized_dsmem_reduction.py): the row's 8 blocks run as one thread-block cluster;
the partials meet in distributed shared memory (``cluster.map_shared_rank``) and each block scales
the chunk it still holds in registers: 512 MB of traffic, one launch.
Same partials summed in the same order: the outputs should agree bit for bit.
Expect (measured, H200, 2026-11-23): 0.217 ms per call: its 768 MB at 3.71 TB/s, 88% of the 4.2 TB/s
HBM copy rate.
Run: python ch10/baseline_dsmem_reduction.py  |  aisp bench run -t ch10:dsmem_reduction
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch10b_common import FLOAT, HOPPER, INT, PTR, library

import aisp
from aisp.kits import native
from aisp.kits.native import ptr


@dataclass(frozen=True, kw_only=True)
class RmsRowsWorkload(aisp.Workload):
    rows: int = 1024
    cols: int = 65536
    """Fixed by the kernels: 8 blocks x 256 threads x 32 floats."""
    eps: float = 1e-6


def _workload() -> RmsRowsWorkload:
    s = RmsRowsWorkload()
    n = s.rows * s.cols
    return RmsRowsWorkload(flops=3.0 * n, bytes=8.0 * n, items=s.rows, item_unit="rows", precision="fp32",
                           requires=HOPPER)


WORKLOAD = _workload()
LIBRARY = library("dsmem_reduction.cu")


def rms_reference(x: torch.Tensor, eps: float) -> torch.Tensor:
    """The kernels' result in PyTorch (fp64 sums)."""
    return (x.double() * torch.rsqrt(x.double().square().mean(dim=1, keepdim=True) + eps)).float()


class TwoPassRms(aisp.Benchmark):
    """y = x * rsqrt(mean(x^2, row) + eps), each row reduced by 8 blocks."""

    workload = WORKLOAD
    inputs = ("x",)
    scratch = ("y", "partials")
    use_cluster = 0
    """dsmem_reduction.cu: 0 partials through global memory and a second kernel, 1 cluster + DSMEM."""

    def setup(self) -> None:
        w = self.workload
        self.lib = LIBRARY.load(self.device, {"rms_rows_run": [INT, PTR, PTR, PTR, INT, INT, FLOAT, PTR]})
        self.x = torch.randn(w.rows, w.cols, device=self.device, generator=self.generator())
        self.y = torch.empty_like(self.x)
        self.partials = torch.empty(w.rows, 8, device=self.device)
        torch.testing.assert_close(self.run(), rms_reference(self.x, w.eps), rtol=1e-5, atol=1e-5)

    def run(self) -> torch.Tensor:
        w = self.workload
        status = self.lib.rms_rows_run(self.use_cluster, ptr(self.x), ptr(self.y), ptr(self.partials), w.rows, w.cols,
                                       w.eps, native.stream(self.device))
        native.check(status, type(self).__name__)
        return self.y


def get_benchmark() -> aisp.Benchmark:
    return TwoPassRms()


if __name__ == "__main__":
    aisp.main(get_benchmark)
