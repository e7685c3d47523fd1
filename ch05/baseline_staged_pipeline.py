"""Baseline staged pipeline: read a chunk from disk, copy it to the GPU, compute; one after another.

Baseline: a 256 MiB fp32 file of 16 chunks (2,048 x 2,048 each, 16 MiB); a call reads them in the
order of the per-call input ``order`` (a shuffled epoch) into one pageable host buffer, copies
each with ``.to(device)`` (pageable: staged by the driver, and it waits for the GPU to go idle)
and runs the model on it (8 fp32 matmuls, 137 GFLOP per chunk). The GPU computes chunk c while the
host reads chunk c + 1, but each pageable copy waits for that compute: read, copy and compute
take turns. Page cache: cold on both sides, on purpose: each call first drops the file's pages
(``posix_fadvise(DONTNEED)`` on the fsync'ed file), so every chunk comes from the disk, as it does
when streaming a data set larger than RAM.
Optimized (optimized_staged_pipeline.py): a reader thread fills two pinned buffers in turn, a
copy stream DMAs each into one of two device buffers, and the compute stream works on the other:
disk, PCIe and SMs all busy at once; the time tends to the slowest stage.
Ceiling: min(disk read, PCIe, compute). ``pct_of_disk_read`` (metrics) is the file bytes over the
call's wall time against ``disk_read`` from disk_ceiling.py; the roofline shows the same bytes
against pinned H2D.
Expect (measured, H200, 2026-11-23): 216.9 -> 180.8 ms, 1.17x [1.14, 1.20]. The disk binds (256 MiB
at 1.9 GB/s = 141 ms, compute 43 ms); the baseline already reads at 64% of disk_read, so 1.54x is
the most overlap could win; the optimized reaches 77% of disk_read.
Run: python ch05/baseline_staged_pipeline.py  |  aisp bench run -t ch05:staged_pipeline
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
from ch05_io import RateLog, drop_cache, pread_into, remove, scratch_dir, write_file

import aisp


@dataclass(frozen=True, kw_only=True)
class StreamWorkload(aisp.Workload):
    chunks: int = 16
    rows: int = 2048
    cols: int = 2048
    reps: int = 8
    """Matmuls per chunk (the model)."""

    @property
    def chunk_bytes(self) -> int:
        return self.rows * self.cols * 4


WORKLOAD = StreamWorkload(bytes=16 * 2048 * 2048 * 4.0, link="h2d", flops=16 * 8 * 2 * 2048**3.0, items=16,
                          item_unit="chunks", precision="fp32", requires=aisp.Requirements(cuda=True),
                          ceiling_note="profiled (torch profiler, H200): GPU idle 75% of a 219 ms window (gaps up to 32.7 ms) waiting on disk reads; GEMMs 43.5 ms, H2D copies 5.1 ms",
                          window="idle")


class SerialPipeline(aisp.Benchmark):
    """Returns, per chunk read, the column sums of the model's output: (chunks, cols) fp32."""

    workload = WORKLOAD
    inputs = ("order",)
    scratch = ("host", "out")

    def setup(self) -> None:
        w, gen = self.workload, torch.Generator().manual_seed(self.seed)
        self.folder = scratch_dir("stream")
        self.path = self.folder / "data.f32"
        write_file(self.path, torch.randn(w.chunks * w.rows, w.cols, generator=gen).numpy())
        self.weight = (torch.randn(w.cols, w.cols, generator=gen) / w.cols**0.5).to(self.device)
        self.order = torch.randperm(w.chunks, generator=gen)
        self.out = torch.empty(w.chunks, w.cols, device=self.device)
        self.log = RateLog(w.chunks * w.chunk_bytes)
        self.prepare()

    def prepare(self) -> None:
        self.host = torch.empty(self.workload.rows, self.workload.cols)

    def model(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.workload.reps):
            x = x @ self.weight
        return x.sum(0)

    def run(self) -> torch.Tensor:
        self.log.start()
        drop_cache(self.path)
        self.stream_chunks()
        torch.cuda.current_stream().synchronize()
        self.log.stop()
        return self.out

    def stream_chunks(self) -> None:
        fd = os.open(self.path, os.O_RDONLY)
        try:
            for c, k in enumerate(self.order.tolist()):
                pread_into(fd, self.host, k * self.workload.chunk_bytes)
                self.out[c] = self.model(self.host.to(self.device))
        finally:
            os.close(fd)

    def metrics(self) -> dict[str, float]:
        return self.log.metrics()

    def teardown(self) -> None:
        remove(self.folder)


def get_benchmark() -> aisp.Benchmark:
    return SerialPipeline()


if __name__ == "__main__":
    aisp.main(get_benchmark)
