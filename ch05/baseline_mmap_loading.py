"""Baseline mmap loading: each batch loads its whole .npy shard with ``np.load``, then slices it.

Baseline: a data set of 8 shards, each a (8,192 x 1,024) fp32 .npy file (32 MiB); a shard-aware
sampler draws a batch of 512 rows from one shard (per-call inputs ``shard`` and ``rows``). The
Dataset does what many do: ``np.load(path)`` (allocates and copies all 32 MiB), fancy-indexes the
rows (another 2 MiB copy) and sends the batch with ``.to(device)`` from pageable memory.
Optimized (optimized_mmap_loading.py): the shards are opened once with ``np.load(mmap_mode="r")``;
a batch gathers only its 512 rows (2 MiB) straight from the mapped pages into a pinned staging
buffer (``np.take(..., out=)``), then one ``non_blocking`` DMA to the device: 16x fewer bytes copied.
Page cache: warm on both sides, on purpose (files written in setup() stay cached): the lesson is
bytes copied per batch, not disk speed; a cold shard would cost the baseline a 32 MiB disk read.
Expect (measured, H200, 2026-11-23): 5.63 -> 0.328 ms, 17.6x [17.0, 18.3] (our 2-core CPU box:
67.7x); the optimized reaches 6.4 GB/s, 12% of pinned H2D: the host's 512-row gather bounds it, not
the 0.04 ms DMA.
Run: python ch05/baseline_mmap_loading.py  |  aisp bench run -t ch05:mmap_loading
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from ch05_io import remove, scratch_dir

import aisp


@dataclass(frozen=True, kw_only=True)
class ShardedArrays(aisp.Workload):
    shards: int = 8
    """.npy files in the data set (256 MiB in all)."""
    rows: int = 8192
    """Rows per shard."""
    features: int = 1024
    """fp32 values per row (4 KiB)."""
    batch: int = 512
    """Rows per batch, all from one shard."""


WORKLOAD = ShardedArrays(bytes=512 * 1024 * 4, link="h2d", items=512, item_unit="rows", precision="fp32",
                         ceiling_note="profiled (py-spy, 2-core CPU host): optimized: np.take's 512-row gather 88% of samples, run() 11%; baseline: np.load's read 87%",
                         window="idle")
"""bytes: the batch that must reach the device; on a GPU the roofline shows it against pinned H2D."""


class NpyLoader(aisp.Benchmark):
    """Returns the batch ``rows`` of shard ``shard`` on ``self.device``."""

    workload = WORKLOAD
    inputs = ("shard", "rows")

    def setup(self) -> None:
        w, gen = self.workload, torch.Generator().manual_seed(self.seed)
        self.folder = scratch_dir("npy")
        self.paths = [self.folder / f"shard_{s:03d}.npy" for s in range(w.shards)]
        for path in self.paths:
            np.save(path, torch.randn(w.rows, w.features, generator=gen).numpy())
        self.shard = torch.randint(0, w.shards, (1,), generator=gen)
        self.rows = torch.randint(0, w.rows, (w.batch,), generator=gen)
        self.prepare()

    def prepare(self) -> None:
        """Nothing to open ahead: the baseline loads the shard inside each call."""

    def run(self) -> torch.Tensor:
        array = np.load(self.paths[int(self.shard)])
        batch = torch.from_numpy(array[self.rows.numpy()]).to(self.device)
        return batch

    def teardown(self) -> None:
        remove(self.folder)


def get_benchmark() -> aisp.Benchmark:
    return NpyLoader()


if __name__ == "__main__":
    aisp.main(get_benchmark)
