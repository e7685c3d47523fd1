"""Baseline work queue (CUDA C++): rows of skewed lengths dealt round-robin to a persistent grid.

The work: the sum of each of 16,384 rows of a CSR-like array of ~59M floats (235 MiB), row lengths
log-normal (sigma 1.5, mean 4,096 floats, at most 32,768), in random order: a row is one work item,
reduced by one 256-thread block. The grid is persistent: as many blocks as fit on the GPU at once.
Baseline: work_queue.cu ``wq_static``: block b sums rows b, b + G, b + 2G, ...; the assignment is
fixed before the launch. What counts is each SM's load (its 8 resident blocks share its bandwidth):
simulated for these lengths, the busiest SM carries 1.47x the mean, and the last SMs finish long
after the others went idle. (With sigma 1 and 32K shorter rows it was 1.22x, and the queue's
per-row overhead ate the gain: 0.95x on the H200.)
Optimized (optimized_work_queue.py): ``wq_dynamic``: each block takes its next row from an atomic
counter as soon as it finishes one; loads even out to within about one row.
(A grid of one block per row is balanced by the hardware scheduler; persistent blocks are for
kernels whose blocks keep state between items, and there the assignment is the programmer's.)
Ceiling: HBM read bandwidth (235 MiB per call; ~4.2 TB/s measured copy rate on the H200).
Expect (measured, H200, 2026-11-23): 1.04x [1.02, 1.06] (0.0833 -> 0.0802 ms); the queue at 2.93
TB/s, 70% of the HBM copy rate. The first version (32K rows, sigma 1, one load in flight) measured
0.95x at 2.28 TB/s.
Run: python ch12/baseline_work_queue.py  |  aisp bench run -t ch12:work_queue
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import torch
from ch12_common import INT, PTR, library

import aisp
from aisp.kits import native


@dataclass(frozen=True, kw_only=True)
class QueueWorkload(aisp.Workload):
    rows: int = 16384
    mean_length: int = 4096
    max_length: int = 32768
    sigma: float = 1.5
    """Log-normal spread of row lengths."""

    def lengths(self) -> torch.Tensor:
        """Row lengths (multiples of 4, so every row starts 16-byte aligned), the same on every run."""
        gen = torch.Generator().manual_seed(12)
        raw = torch.empty(self.rows, dtype=torch.float64).log_normal_(0.0, self.sigma, generator=gen)
        scaled = raw / raw.mean() * self.mean_length
        return (4 * torch.round(scaled / 4)).clamp(4, self.max_length).long()


def _workload() -> QueueWorkload:
    s = QueueWorkload()
    total = float(s.lengths().sum())
    # fp32 tree sums of up to 32K unit normals: ~1e-5 relative to the row's scale.
    return QueueWorkload(flops=total, bytes=4.0 * total + 12.0 * s.rows, items=s.rows, item_unit="rows",
                         precision="fp32", requires=native.REQUIRES,
                         ceiling_note="ncu: kernel 65 us at DRAM 76% (3.65 TB/s), long_scoreboard 26 + barrier 15 warps/issue; the 85 us call has ~20 us outside its kernels")


WORKLOAD = _workload()
LIBRARY = library("work_queue")
SIGNATURES = {"wq_grid": [ctypes.POINTER(INT)], "wq_static": [PTR, PTR, PTR, INT, INT, PTR],
              "wq_dynamic": [PTR, PTR, PTR, INT, INT, PTR, PTR]}


def row_sums_reference(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Each row's sum in float64, from prefix sums."""
    prefix = torch.cat([x.new_zeros(1, dtype=torch.float64), x.double().cumsum(0)])
    return prefix[offsets[1:]] - prefix[offsets[:-1]]


class RoundRobinRows(aisp.Benchmark):
    """out[r] = sum of row r, rows dealt round-robin to the blocks."""

    workload = WORKLOAD
    inputs = ("x",)
    scratch = ("out",)

    def setup(self) -> None:
        w = self.workload
        self.lib = LIBRARY.load(self.device, SIGNATURES)
        lengths = w.lengths()
        self.offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)]).to(self.device)
        self.x = torch.randn(int(lengths.sum()), device=self.device, generator=self.generator())
        self.out = torch.empty(w.rows, device=self.device)
        self.next_row = torch.zeros(1, dtype=torch.int32, device=self.device)
        blocks = ctypes.c_int(0)
        native.check(self.lib.wq_grid(ctypes.byref(blocks)), "wq_grid")
        self.blocks = blocks.value
        got = self.run().clone()
        torch.testing.assert_close(got.double(), row_sums_reference(self.x, self.offsets), rtol=1e-4, atol=1e-3)

    def run(self) -> torch.Tensor:
        native.check(self.lib.wq_static(self.x.data_ptr(), self.offsets.data_ptr(), self.out.data_ptr(),
                                        self.workload.rows, self.blocks, native.stream(self.device)), "wq_static")
        return self.out


def get_benchmark() -> aisp.Benchmark:
    return RoundRobinRows()


if __name__ == "__main__":
    aisp.main(get_benchmark)
