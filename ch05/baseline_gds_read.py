"""Baseline GDS read: POSIX reads into a pinned host buffer, then one copy to the GPU.

Baseline: a 256 MiB file of 16 chunks (16 MiB each), read cold (each call first drops the file's
pages with ``posix_fadvise(DONTNEED)``) in the order of the per-call input ``order`` with ``pread``
into a 256 MiB pinned bounce buffer, then one DMA to device memory: the bytes cross host memory
twice (disk -> page cache -> bounce buffer) and the copy starts only after the last read.
Optimized: ``optimized_gds_read.py`` reads each chunk with cuFile through PyTorch's
``torch.cuda.gds.GdsFile.load_storage`` (O_DIRECT): with GPUDirect Storage the NVMe DMAs straight
into GPU memory; without the ``nvidia-fs`` kernel module cuFile runs its compatibility mode (POSIX
reads through its own pinned buffers), and the figure measures that: ``python ch05/gds_check.py``
says which mode this machine has. ``optimized_gds_read_kvikio.py`` does the same through KvikIO's
thread pool (parallel reads; skipped without the ``kvikio`` package, as on our H200 machine).
Ceiling: the disk's sequential read (``disk_read``, disk_ceiling.py): ``pct_of_disk_read`` in the
metrics; the roofline shows the 256 MiB against pinned H2D.
Expect: estimate, not measured: ~1x in cuFile compatibility mode (same POSIX reads, no
bounce-then-copy tail: 1.0-1.3x), more with real GDS on NVMe; the baseline near the disk ceiling.
Not measured on the H200: on 2026-11-23 the cuFile variant ended with an error (no nvidia-fs, so
cuFile could not register the file); on 2026-11-26 the pair was skipped with the reason ("cuFile
cannot open data.bin: cuFileHandleRegister failed: ...", through aisp.Unavailable; no GDS-capable
file system in the container), and kvikio was not installed (README, example 7).
Run: python ch05/baseline_gds_read.py  |  aisp bench run -t ch05:gds_read  |  python ch05/gds_check.py
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
from ch05_io import RateLog, drop_cache, pread_into, remove, scratch_dir, seeded_bytes, write_file

import aisp


@dataclass(frozen=True, kw_only=True)
class FileWorkload(aisp.Workload):
    chunks: int = 16
    chunk_bytes: int = 16 << 20
    """Bytes per read: a multiple of 4 KiB, as O_DIRECT and GDS want."""


WORKLOAD = FileWorkload(bytes=256.0 * 2**20, link="h2d", items=16, item_unit="chunks", precision="exact",
                        requires=aisp.Requirements(cuda=True),
                        window="idle")


class PosixRead(aisp.Benchmark):
    """Reads chunks ``order`` of the file into device memory: a (chunks, chunk_bytes) uint8 tensor."""

    workload = WORKLOAD
    inputs = ("order",)
    scratch = ("host", "out")

    def setup(self) -> None:
        w = self.workload
        self.folder = scratch_dir("gds")
        self.path = self.folder / "data.bin"
        write_file(self.path, seeded_bytes(self.seed, w.chunks * w.chunk_bytes))
        self.order = torch.randperm(w.chunks, generator=torch.Generator().manual_seed(self.seed))
        self.out = torch.empty(w.chunks, w.chunk_bytes, dtype=torch.uint8, device=self.device)
        self.log = RateLog(w.chunks * w.chunk_bytes)
        self.prepare()

    def prepare(self) -> None:
        self.host = torch.empty(self.out.shape, dtype=torch.uint8, pin_memory=True)

    def run(self) -> torch.Tensor:
        self.log.start()
        drop_cache(self.path)
        self.read()
        torch.cuda.current_stream().synchronize()
        self.log.stop()
        return self.out

    def read(self) -> None:
        fd = os.open(self.path, os.O_RDONLY)
        try:
            for c, k in enumerate(self.order.tolist()):
                pread_into(fd, self.host[c], k * self.workload.chunk_bytes)
        finally:
            os.close(fd)
        self.out.copy_(self.host, non_blocking=True)

    def metrics(self) -> dict[str, float]:
        return self.log.metrics()

    def teardown(self) -> None:
        remove(self.folder)


def get_benchmark() -> aisp.Benchmark:
    return PosixRead()


if __name__ == "__main__":
    aisp.main(get_benchmark)
