"""Optimized packed shards, io_uring: the batch's 2,048 reads submitted in one system call.

Baseline (baseline_packed_shards.py): one file per sample: open, read, close for each of 2,048.
Optimized (optimized_packed_shards.py, the measured fallback): one packed shard, one ``os.preadv``
per sample: 2,048 system calls and 2,048 turns of a Python loop a batch. This variant: the same
shard and fd, the same 2,048 samples of 16 KiB at the sampler's offsets into the same batch rows, but
the reads are put in file order (better locality in the page cache), samples back to back in the shard
are merged into one vectored read (~1,535 requests for 2,048 random samples of 8,192), and all the
requests go into an io_uring's ring, written with numpy (a vector store per field, no Python per
sample), to the kernel in one ``io_uring_enter``, which serves them from the page cache inline, on
this thread (ch05_uring.py). Same bytes copied once out of the page cache in the timed call, same
output. Where io_uring is forbidden (seccomp, kernel.io_uring_disabled) setup() raises
aisp.Unavailable and the harness keeps optimized_packed_shards.
Expect (measured, H200 host, 2026-11-29; two runs of 20 samples): 9.04 and 8.67 ms median (min 7.79,
7.69) against the preadv variant's 10.10 and 10.23 (min 8.71, 9.63): 1.12-1.18x it, 69-71% of
page_cache_read (the estimate was 74-84%). Its estimate, from our 2-core CPU box: the preadv variant
takes ~4.5 us a sample of which the copy alone is ~3 us; io_uring removed about a third of the rest.
Run: python ch05/optimized_packed_shards_uring.py  |  aisp bench run -t ch05:packed_shards
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from ch05_io import pread_into
from ch05_uring import Ring, file_order_runs, run_requests
from optimized_packed_shards import ShardReader

import aisp

MAX_ENTRIES = 4096
"""Ring slots at most (IORING_MAX_ENTRIES of older kernels); a larger batch goes in several turns."""


class UringShardReader(ShardReader):
    """Reads the batch's samples from the shard with one io_uring submission a ring's worth."""

    def setup(self) -> None:
        try:  # before the files: nothing to clean up if this machine forbids io_uring
            self.ring = Ring(min(MAX_ENTRIES, 1 << (self.workload.batch - 1).bit_length()))
        except OSError as exc:
            raise aisp.Unavailable(f"io_uring cannot be set up here: {exc}") from exc
        super().setup()

    def write(self, folder: Path, data) -> None:
        super().write(folder, data)
        self.starts = np.asarray(self.offsets, dtype=np.uint64)  # the shard's index: sample i's offset
        self.iov = np.empty((self.workload.batch, 2), dtype=np.uint64)  # workspace: READV's (address, length)s

    def run(self) -> torch.Tensor:
        self.log.start()
        out, fd, size = self.out, self.fd, self.workload.sample_bytes
        rows = self.order.numpy()
        if not (out.is_contiguous() and out.dtype == torch.uint8 and out.shape == (len(rows), size)):
            raise ValueError(f"the batch buffer must be a contiguous uint8 ({len(rows)}, {size}) tensor")
        offsets = self.starts[rows]  # IndexError for an index outside the shard, as the list did
        perm, heads, counts = file_order_runs(offsets, size)
        ops, addrs, lens = run_requests(perm, heads, counts, size, out.data_ptr(), self.iov)
        starts, slots = offsets[perm[heads]], self.ring.entries
        for first in range(0, len(heads), slots):
            got = self.ring.read(fd, starts[first:first + slots], addrs[first:first + slots],
                                 lens[first:first + slots], ops[first:first + slots])
            for j in np.flatnonzero(got != counts[first:first + slots] * size).tolist():
                run = first + j  # short or failed: its rows again by pread (which raises on errors)
                for row in perm[heads[run]:heads[run] + counts[run]].tolist():
                    pread_into(fd, out[row], int(offsets[row]))
        self.log.stop()
        return out

    def teardown(self) -> None:
        if (ring := self.__dict__.pop("ring", None)) is not None:
            ring.close()
        super().teardown()


def get_benchmark() -> aisp.Benchmark:
    return UringShardReader()


if __name__ == "__main__":
    aisp.main(get_benchmark)
