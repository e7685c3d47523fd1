"""Baseline double buffering: copy a chunk in, compute on it, repeat: the copy engine and the SMs take turns.

Baseline: 8 chunks of 4096x1024 fp32 (16 MiB each, pinned host memory) flow through a
two-layer fp32 MLP (``relu(x @ w1) @ w2``, 17 GFLOP per chunk). One stream: each chunk's H2D
copy (~0.3 ms at 55 GB/s) waits for the previous chunk's compute (~0.35 ms) and vice versa,
so the time is the sum of both.
Optimized (optimized_double_buffering.py): two device buffers and a copy stream; chunk i+1
is copied while chunk i is computed, ordered by CUDA events, so the time approaches the larger
of the two (plus one copy that cannot be hidden).
Expect: 1.5-1.9x on an H100/H200; ``metrics()`` reports copy-only and compute-only times and
how much of the shorter one was hidden.
Run: python ch01/baseline_double_buffering.py  |  aisp bench run -t ch01:double_buffering
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch01_common import seconds

import aisp


@dataclass(frozen=True, kw_only=True)
class StreamWorkload(aisp.Workload):
    chunks: int = 8
    rows: int = 4096
    dim: int = 1024


def _stream_workload() -> StreamWorkload:
    shape = StreamWorkload()
    data = shape.chunks * shape.rows * shape.dim
    return StreamWorkload(flops=4.0 * data * shape.dim, bytes=4.0 * (2 * data + 2 * shape.dim**2),
                          items=shape.chunks * shape.rows, item_unit="rows", precision="fp32",
                          requires=aisp.Requirements(cuda=True))


WORKLOAD = _stream_workload()


class SerialChunks(aisp.Benchmark):
    """Copies and computes each chunk in turn on one stream."""

    workload = WORKLOAD
    inputs = ("host",)
    scratch = ("out", "bufs")

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        cpu_gen = torch.Generator().manual_seed(self.seed)
        self.host = torch.randn(w.chunks, w.rows, w.dim, generator=cpu_gen).pin_memory()
        self.w1 = torch.randn(w.dim, w.dim, device=self.device, generator=gen) / w.dim**0.5
        self.w2 = torch.randn(w.dim, w.dim, device=self.device, generator=gen) / w.dim**0.5
        self.bufs = [torch.empty(w.rows, w.dim, device=self.device) for _ in range(2)]
        self.out = torch.empty(w.chunks, w.rows, w.dim, device=self.device)

    def copy_in(self, i: int) -> torch.Tensor:
        return self.bufs[i % 2].copy_(self.host[i], non_blocking=True)

    def compute(self, x: torch.Tensor, i: int) -> None:
        torch.mm(torch.relu(x @ self.w1), self.w2, out=self.out[i])

    def run(self) -> torch.Tensor:
        for i in range(self.workload.chunks):
            self.compute(self.copy_in(i), i)
        return self.out

    def metrics(self) -> dict[str, float]:
        """Copy-only and compute-only times, and the share of the shorter one hidden by overlap."""
        n = self.workload.chunks
        copy = seconds(lambda: [self.copy_in(i) for i in range(n)], self.device)
        compute = seconds(lambda: [self.compute(self.bufs[i % 2], i) for i in range(n)], self.device)
        total = seconds(self.run, self.device)
        hidden = (copy + compute - total) / min(copy, compute)
        return {"copy_ms": copy * 1e3, "compute_ms": compute * 1e3, "loop_ms": total * 1e3,
                "hidden_fraction": hidden}


def get_benchmark() -> aisp.Benchmark:
    return SerialChunks()


if __name__ == "__main__":
    aisp.main(get_benchmark)
