"""Optimized mmap loading: memory-mapped shards, rows gathered into a pinned staging buffer.

Baseline (baseline_mmap_loading.py): ``np.load`` copies the whole 32 MiB shard for every batch,
then slices 512 rows and copies them from pageable memory.
Optimized: each shard is mapped once (``np.load(path, mmap_mode="r")``: no bytes copied until
touched); a batch gathers its 512 rows (2 MiB) from the mapped pages straight into a preallocated
staging buffer, page-locked on a GPU (``np.take(..., out=)``, ``mode="clip"`` so numpy writes in
place instead of buffering), then one ``non_blocking`` copy into a preallocated device buffer.
Same rows, same values. Page cache warm on both sides (see the baseline).
Expect (measured, H200, 2026-11-23): 5.63 -> 0.328 ms, 17.6x [17.0, 18.3]; 12% of pinned H2D (the
row gather on the host bounds it).
Run: python ch05/optimized_mmap_loading.py  |  aisp bench run -t ch05:mmap_loading
"""

from __future__ import annotations

import numpy as np
import torch
from baseline_mmap_loading import NpyLoader

import aisp


class MappedLoader(NpyLoader):
    """Gathers rows from memory-mapped shards into a (pinned) staging buffer."""

    scratch = ("staging", "out")

    def prepare(self) -> None:
        w, cuda = self.workload, self.device.type == "cuda"
        self.maps = [np.load(path, mmap_mode="r") for path in self.paths]
        self.staging = torch.empty(w.batch, w.features, pin_memory=cuda)
        self.out = torch.empty(w.batch, w.features, device=self.device) if cuda else self.staging

    def run(self) -> torch.Tensor:
        np.take(self.maps[int(self.shard)], self.rows.numpy(), axis=0, out=self.staging.numpy(), mode="clip")
        if self.out is not self.staging:
            self.out.copy_(self.staging, non_blocking=True)
        return self.out

    def teardown(self) -> None:
        self.maps = []
        super().teardown()


def get_benchmark() -> aisp.Benchmark:
    return MappedLoader()


if __name__ == "__main__":
    aisp.main(get_benchmark)
