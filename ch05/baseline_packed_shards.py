"""Baseline packed shards: a batch of 2,048 samples read from one small file per sample.

Baseline: the ImageFolder layout: 8,192 samples of 16 KiB, one file each; a batch of 2,048
(indices drawn by a sampler: the per-call input ``order``) opens, reads and closes 2,048 files:
a path lookup, an fd, a Python file object and three system calls per sample.
Optimized (optimized_packed_shards.py): the same samples packed into one shard with an offset
index (WebDataset/TFRecord style); the shard is opened once and each sample is one ``pread``
at its offset into the batch buffer: one system call per sample, no path lookups.
Page cache: warm on both sides, on purpose: files are written in setup() and stay cached; this
pair is about the per-file overhead that remains once the data is in memory (a data set that fits
in RAM after its first epoch), not about the disk (staged_pipeline and gds_read read cold).
Expect (measured, H200, 2026-11-23): 25.24 -> 7.10 ms, 3.56x [3.53, 3.60] on the H200 host (the host
does all the work; the GPU is idle): 12.3 -> 3.5 us per sample, 1.31 -> 4.71 GB/s of page-cache
reads (achieved GB/s is reported as a metric); on our 2-core CPU box: 5.25x (182 -> 33.6 ms,
harness, 5 iterations).
Run: python ch05/baseline_packed_shards.py  |  aisp bench run -t ch05:packed_shards
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from ch05_io import RateLog, remove, scratch_dir, seeded_bytes

import aisp


@dataclass(frozen=True, kw_only=True)
class ShardWorkload(aisp.Workload):
    samples: int = 8192
    """Samples on disk (128 MiB at 16 KiB each)."""
    sample_bytes: int = 16 << 10
    """Bytes per sample (a tokenized document, an audio snippet, a small compressed image)."""
    batch: int = 2048
    """Samples read per run()."""


def _workload() -> ShardWorkload:
    w = ShardWorkload()
    # bytes: the batch's samples copied once out of the page cache, at aisp peak's page_cache_read (1 MiB preads).
    return ShardWorkload(items=w.batch, item_unit="samples", precision="exact",
                         bytes=float(w.batch * w.sample_bytes), link="page_cache",
                         ceiling_note="profiled (py-spy, 2-core CPU host): the preadv variant 100% in its read loop, a 16 KiB read a call; io_uring (best, 69-71%) batches them",
                         window="idle")


WORKLOAD = _workload()


class SampleReader(aisp.Benchmark):
    """Reads the samples ``order`` names into one (batch, sample_bytes) uint8 buffer."""

    workload = WORKLOAD
    inputs = ("order",)
    scratch = ("out",)

    def setup(self) -> None:
        w = self.workload
        self.folder = scratch_dir(self.layout())
        self.write(self.folder, seeded_bytes(self.seed, w.samples * w.sample_bytes).reshape(w.samples, -1))
        gen = torch.Generator().manual_seed(self.seed)
        self.order = torch.randperm(w.samples, generator=gen)[:w.batch]
        self.out = torch.empty(w.batch, w.sample_bytes, dtype=torch.uint8)
        self.log = RateLog(w.batch * w.sample_bytes)

    def layout(self) -> str:
        return "files"

    def write(self, folder: Path, data) -> None:
        for i, row in enumerate(data):
            (folder / f"{i:06d}.bin").write_bytes(row.tobytes())

    def run(self) -> torch.Tensor:
        self.log.start()
        view = self.out.numpy()
        for row, i in enumerate(self.order.tolist()):
            with open(self.folder / f"{i:06d}.bin", "rb", buffering=0) as f:
                f.readinto(view[row])
        self.log.stop()
        return self.out

    def metrics(self) -> dict[str, float]:
        return self.log.metrics(ceiling=None)

    def teardown(self) -> None:
        remove(self.folder)


def get_benchmark() -> aisp.Benchmark:
    return SampleReader()


if __name__ == "__main__":
    aisp.main(get_benchmark)
