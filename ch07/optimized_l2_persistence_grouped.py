"""Optimized L2 persistence, rows grouped by table slice: the gathered rows come from shared memory.

Baseline (baseline_l2_persistence.py): random gathers from a 32 MiB table between 1 GiB of streamed
rows. The hints variant (optimized_l2_persistence_hints.py, 0.349 ms, 76% of the 0.2662 ms HBM
ceiling) keeps the table in L2, but every one of the 4M rows still pulls its 128-byte table line
across L2: 512 MiB of the ~1.63 GB a call that L2 serves to the SMs (4.66 TB/s, 89% of the 5.23 TB/s
measured L2 peak), and loading the indices ahead (the `_ahead` attempt) did not move it.
Optimized (this file): ``gather_add_grouped_run`` (l2_persistence.cu) groups the rows by slice of 512
table rows (64 KiB) with a counting sort in the timed call: a memset, ``group_count`` (rows a slice,
idx read once), ``group_scatter`` (row numbers in slice order, a uint32 each, packed with the row's
place in its slice), then ``gather_add_grouped``: 2 blocks an SM, each copies a slice into shared
memory once and adds it to the rows of its share that use it, x and out a whole 128-byte row per 8
threads under the hints' evict_first policy, 4 rows a thread in flight. The table crosses L2 about
twice (32 MiB per slice pass) instead of 16 times; out is the same bits (one fp32 add a value).
Estimate (arithmetic, not a measurement): L2 serves ~1.20 GB a call instead of ~1.63 (x and out 1.07,
idx twice 0.034, the scatter's perm written and read 0.034, table slices ~0.07), below DRAM's bound
again; DRAM moves ~1.11 GB, but x and out as rows in bucket order (random 128-byte lines), which a
copy does not do: 0.27-0.31 ms at 85-95% of the HBM copy rate, plus ~20-30 us for the count and the
scatter, 0.29-0.34 ms (78-92% of the ceiling). If random lines hold DRAM under ~80%, it loses.
Expect: not yet measured on a GPU.
Run: python ch07/optimized_l2_persistence_grouped.py  |  aisp bench run -t ch07:l2_persistence
"""

from __future__ import annotations

import torch
from baseline_l2_persistence import StreamedGather
from ch07_common import INT, LONG, PTR

import aisp
from aisp.kits.native import ptr

SLICE_ROWS = 512
"""Table rows a bucket (kSliceRows in l2_persistence.cu)."""


class GroupedGather(StreamedGather):
    kernel = "gather_add_grouped"

    def prepare(self) -> None:
        """Workspace of the sort (row numbers, counts and cursors) and the launcher bound to it."""
        w, fn = self.workload, self.lib.gather_add_grouped_run
        fn.argtypes, fn.restype = [PTR, PTR, PTR, PTR, LONG, PTR, INT, PTR, PTR], INT
        self.perm = torch.empty(w.rows, dtype=torch.int32, device=self.device)
        self.counts = torch.empty(2 * -(-w.table_rows // SLICE_ROWS), dtype=torch.int32, device=self.device)
        extra = (w.table_rows, ptr(self.perm), ptr(self.counts))
        self.lib.gather_add_grouped = lambda *args: fn(*args, *extra)


def get_benchmark() -> aisp.Benchmark:
    return GroupedGather()


if __name__ == "__main__":
    aisp.main(get_benchmark)
