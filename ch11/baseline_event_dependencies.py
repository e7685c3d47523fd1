"""Baseline event dependencies: a two-stage pipeline on two streams, ordered by a device-wide sync.

Baseline: 32 micro-batches of 512 x 4096 bf16 through two stages, each on its own stream: stage 1
(producer) y[i] = x[i] @ w1 (4096 x 4096), stage 2 (consumer) z[i] = y[i] @ w2 (4096 x 1024).
The consumer of micro-batch i must see y[i], so the loop calls ``torch.cuda.synchronize()``
between the two: the host stops until the GPU is idle, then launches the consumer. Stage 2 of i
still overlaps stage 1 of i+1 (both are launched after the sync), but at every micro-batch the
GPU drains and waits for the host to wake up and launch again (sync wake-up plus launch latency,
tens of us against a ~30 us GEMM, estimate).
Optimized (optimized_event_dependencies.py): the producer records an event after y[i]; the
consumer stream waits on it (``wait_event``), a GPU-side dependency: the host never blocks,
queues all 32 micro-batches ahead, and the two stages overlap with no bubbles.
Same GEMMs, same outputs. ``metrics()`` times each stage alone (32 GEMMs on one stream) and reports
the overlap share (0 = sum of stages, 1 = the longer stage).
Expect: 1.38x [1.35, 1.40] measured on an H200 (2.54 -> 1.85 ms), from the removed host
syncs: both variants take longer than their stages back to back (overlap share -2.5 and -1.1).
Run: python ch11/baseline_event_dependencies.py  |  aisp bench run -t ch11:event_dependencies
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch11_common import overlap

import aisp


@dataclass(frozen=True, kw_only=True)
class PipelineWorkload(aisp.Workload):
    batches: int = 32
    rows: int = 512
    dim: int = 4096
    out_dim: int = 1024


def _workload() -> PipelineWorkload:
    s = PipelineWorkload()
    flops = 2.0 * s.batches * s.rows * s.dim * (s.dim + s.out_dim)
    moved = 2.0 * (s.batches * s.rows * (2 * s.dim + s.dim + s.out_dim) + s.dim * (s.dim + s.out_dim))
    return PipelineWorkload(flops=flops, bytes=moved, items=s.batches, item_unit="micro-batches",
                            precision="bf16", requires=aisp.Requirements(cuda=True),
                            ceiling_note="profiled (torch profiler, H200): stage 1 GEMMs 23.5 us each (128x128 tiles), stage 2 10.2 us "
                                         "(64x64 tiles, ~49% of peak): _graph_grouped runs 8 of 2,048 rows",
                            window="idle")


WORKLOAD = _workload()


class SyncedPipeline(aisp.Benchmark):
    """z[i] = (x[i] @ w1) @ w2, stage 1 on the producer stream, stage 2 on the consumer stream."""

    workload = WORKLOAD
    inputs = ("x",)
    scratch = ("y", "z")

    def setup(self) -> None:
        w, gen, dev = self.workload, self.generator(), self.device
        self.x = torch.randn(w.batches, w.rows, w.dim, device=dev, generator=gen).to(torch.bfloat16)
        self.w1 = (torch.randn(w.dim, w.dim, device=dev, generator=gen) / w.dim**0.5).to(torch.bfloat16)
        self.w2 = (torch.randn(w.dim, w.out_dim, device=dev, generator=gen) / w.dim**0.5).to(torch.bfloat16)
        self.y = torch.empty(w.batches, w.rows, w.dim, device=dev, dtype=torch.bfloat16)
        self.z = torch.empty(w.batches, w.rows, w.out_dim, device=dev, dtype=torch.bfloat16)
        self.producer = torch.cuda.Stream(dev)
        self.consumer = torch.cuda.Stream(dev)

    def produce(self, i: int) -> None:
        torch.mm(self.x[i], self.w1, out=self.y[i])

    def consume(self, i: int) -> None:
        torch.mm(self.y[i], self.w2, out=self.z[i])

    def run(self) -> torch.Tensor:
        current = torch.cuda.current_stream(self.device)
        self.producer.wait_stream(current)
        self.consumer.wait_stream(current)
        for i in range(self.workload.batches):
            with torch.cuda.stream(self.producer):
                self.produce(i)
            torch.cuda.synchronize(self.device)
            with torch.cuda.stream(self.consumer):
                self.consume(i)
        current.wait_stream(self.consumer)
        return self.z

    def stage(self, fn: str) -> None:
        """One stage's 32 GEMMs alone, on the current stream."""
        for i in range(self.workload.batches):
            getattr(self, fn)(i)

    def metrics(self) -> dict[str, float]:
        """Each stage alone, their sum and max, this variant's call, and its overlap share."""
        parts = {"producer": lambda: self.stage("produce"), "consumer": lambda: self.stage("consume")}
        return overlap(parts, self.run, self.device)


def get_benchmark() -> aisp.Benchmark:
    return SyncedPipeline()


if __name__ == "__main__":
    aisp.main(get_benchmark)
