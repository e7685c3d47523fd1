"""Baseline shared-memory occupancy (CUDA C++): a row softmax that reserves shared memory for its longest row.

Baseline: softmax over each row of a 32,768 x 4,096 fp32 matrix (512 MiB in, 512 MiB out), one
256-thread block per row, the row cached in dynamic shared memory between the three passes (max,
sum of exponentials, scale) so it is read from DRAM once (softmax_smem.cu, ``row_softmax``). The
launch reserves room for the longest row the kernel supports, 24,576 floats = 96 KB per block: two
blocks fit in an SM's 228 KB, 16 warps per SM (25% occupancy), too few loads in flight to cover
DRAM latency, and while both blocks reduce, the SM moves nothing.
Optimized (optimized_smem_occupancy.py): the same kernel asking for the 16 KB its row needs: the
2,048-thread limit binds first, 8 blocks (64 warps) per SM. Same kernel, same bytes: bitwise-equal.
``metrics()`` reports the resident blocks per SM from the occupancy API.
Expect: 1.24x [1.23, 1.25] measured on an H200 (0.341 -> 0.275 ms); the optimized at 3.90 TB/s, 93% of the
HBM copy bandwidth (baseline 3.15 TB/s, 75%).
Run: python ch08/baseline_smem_occupancy.py  |  aisp bench run -t ch08:smem_occupancy
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch08_common import INT, LONG, PTR, bind, call, int_out, library

import aisp
from aisp.kits import native


@dataclass(frozen=True, kw_only=True)
class SoftmaxWorkload(aisp.Workload):
    rows: int = 32768
    cols: int = 4096


def _workload() -> SoftmaxWorkload:
    s = SoftmaxWorkload()
    return SoftmaxWorkload(flops=4.0 * s.rows * s.cols, bytes=8.0 * s.rows * s.cols, items=s.rows,
                           item_unit="rows", precision="exact", requires=native.REQUIRES)


WORKLOAD = _workload()
LIBRARY = library("softmax_smem.cu")


class OversizedSmemSoftmax(aisp.Benchmark):
    """Row softmax with 96 KB of shared memory reserved per block."""

    workload = WORKLOAD
    inputs = ("x",)
    scratch = ("y",)
    mode = 0
    """0: shared memory for the longest supported row, 1: for this row (softmax_smem.cu)."""

    def setup(self) -> None:
        w = self.workload
        lib = LIBRARY.load(self.device)
        call(bind(lib, "softmax_init", []))
        self.run_fn = bind(lib, "softmax_run", [INT, PTR, PTR, LONG, LONG, PTR])
        self.blocks_per_sm = int_out(bind(lib, "softmax_blocks_per_sm", [INT, PTR]), self.mode)
        self.x = torch.randn(w.rows, w.cols, generator=self.generator(), device=self.device)
        self.y = torch.empty_like(self.x)
        torch.testing.assert_close(self.run()[:1024], torch.softmax(self.x[:1024], dim=-1), rtol=1e-5, atol=1e-7)

    def run(self) -> torch.Tensor:
        w = self.workload
        call(self.run_fn, self.mode, self.x.data_ptr(), self.y.data_ptr(), w.rows, w.cols, native.stream(self.device))
        return self.y

    def metrics(self) -> dict[str, float]:
        return {"blocks_per_sm": float(self.blocks_per_sm)}


def get_benchmark() -> aisp.Benchmark:
    return OversizedSmemSoftmax()


if __name__ == "__main__":
    aisp.main(get_benchmark)
