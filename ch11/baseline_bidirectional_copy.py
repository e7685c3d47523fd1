"""Baseline bidirectional copy: upload one buffer and download another, both on one stream.

Baseline: 128 MiB host-to-device (pinned source) and 128 MiB device-to-host (pinned destination)
on the current stream. A stream runs its operations in order, so the download waits for the upload
although they touch different buffers and the GPU has a copy engine for each direction:
time = H2D + D2H (~2 x 2.4 ms at 55 GB/s).
Optimized (optimized_bidirectional_copy.py): the download on a second stream, joined back before
``run()`` returns: the two copy engines move data in both directions of the PCIe link at once,
time ~ max(H2D, D2H). Same bytes, same buffers.
``bytes`` counts the upload only (link "h2d"): the roofline shows the upload's rate while the
download rides alongside on the other direction. ``metrics()`` times each direction alone and
reports the call's overlap share (0 = serial sum, 1 = max of the two).
Expect: 1.79x [1.76, 1.82] measured on an H200 (4.89 -> 2.73 ms; ideal 2.0x); each
direction alone 2.44 ms (55 GB/s); the optimized at overlap share 0.90, 49.2 GB/s per direction.
Run: python ch11/baseline_bidirectional_copy.py  |  aisp bench run -t ch11:bidirectional_copy
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch11_common import overlap

import aisp


@dataclass(frozen=True, kw_only=True)
class CopyWorkload(aisp.Workload):
    mib: int = 128
    """Size of each direction's buffer."""


WORKLOAD = CopyWorkload(bytes=128.0 * 2**20, link="h2d", precision="exact",
                        ceiling_note="profiled (torch, H200): the call is its 2 copies, no kernel; 48.5-49.5 GB/s "
                                     "a direction alone (88-92%), 47.5 beside a 16-thread host memcpy",
                        requires=aisp.Requirements(cuda=True))


class OneStreamCopies(aisp.Benchmark):
    """Uploads ``host_src`` into ``dev_dst`` and downloads ``dev_src`` into ``host_dst``."""

    workload = WORKLOAD
    inputs = ("host_src", "dev_src")
    scratch = ("dev_dst", "host_dst")

    def setup(self) -> None:
        count = self.workload.mib * 2**20 // 4
        cpu_gen = torch.Generator().manual_seed(self.seed)
        self.host_src = torch.randn(count, generator=cpu_gen).pin_memory()
        self.dev_src = torch.randn(count, device=self.device, generator=self.generator())
        self.dev_dst = torch.empty(count, device=self.device)
        self.host_dst = torch.empty(count, pin_memory=True)

    def upload(self) -> None:
        self.dev_dst.copy_(self.host_src, non_blocking=True)

    def download(self) -> None:
        self.host_dst.copy_(self.dev_src, non_blocking=True)

    def run(self) -> tuple[torch.Tensor, torch.Tensor]:
        self.upload()
        self.download()
        return self.dev_dst, self.host_dst

    def metrics(self) -> dict[str, float]:
        """Each direction alone, their sum and max, this variant's call, and its overlap share."""
        return overlap({"h2d": self.upload, "d2h": self.download}, self.run, self.device)


def get_benchmark() -> aisp.Benchmark:
    return OneStreamCopies()


if __name__ == "__main__":
    aisp.main(get_benchmark)
