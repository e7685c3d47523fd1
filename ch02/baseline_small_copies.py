"""Baseline small copies: 2,048 host-to-device copies of 4 KiB each, one call per tensor.

Baseline: 2,048 small pinned host tensors (per-request features, a batch of small parameter
shards) each copied into its row of a device buffer with ``copy_(non_blocking=True)``: 8 MiB in
2,048 copies. Each copy pays the framework's dispatch and a driver call (several us) and a DMA
of 4 KiB that moves in well under a microsecond: the link idles between copies.
Optimized (optimized_small_copies.py): the host tensors are packed into one pinned staging buffer
(``torch.cat(out=)``, a CPU memcpy of 8 MiB) and sent in one copy at the PCIe rate.
Expect (measured, H200, 2026-11-23): 4.43x [4.22, 4.65] (12.22 -> 2.84 ms; ~6 us per small copy in
the baseline).
Run: python ch02/baseline_small_copies.py  |  aisp bench run -t ch02:small_copies
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import aisp


@dataclass(frozen=True, kw_only=True)
class CopiesWorkload(aisp.Workload):
    count: int = 2048
    floats: int = 1024
    """4 KiB per tensor."""


WORKLOAD = CopiesWorkload(bytes=2048 * 1024 * 4.0, link="h2d", precision="exact", items=2048, item_unit="copies",
                          ceiling_note="profiled (torch profiler, H200): _mapped's gather 168.5 us (90% of pinned H2D); a call 184 us alone, 221-231 us after a baseline call (probe)",
                          requires=aisp.Requirements(cuda=True),
                          window="idle")


class ManySmallCopies(aisp.Benchmark):
    """One ``copy_`` per small tensor."""

    workload = WORKLOAD
    inputs = ("srcs",)
    scratch = ("dst",)

    def setup(self) -> None:
        w = self.workload
        gen = torch.Generator().manual_seed(self.seed)
        self.srcs = [torch.randn(w.floats, generator=gen).pin_memory() for _ in range(w.count)]
        self.dst = torch.empty(w.count, w.floats, device=self.device)

    def run(self) -> torch.Tensor:
        for row, src in zip(self.dst, self.srcs, strict=True):
            row.copy_(src, non_blocking=True)
        return self.dst


def get_benchmark() -> aisp.Benchmark:
    return ManySmallCopies()


if __name__ == "__main__":
    aisp.main(get_benchmark)
