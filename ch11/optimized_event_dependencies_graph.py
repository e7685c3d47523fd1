"""Optimized event dependencies, graphed: the same two-stream, event-ordered pipeline captured once.

Baseline (baseline_event_dependencies.py): a host sync between producer and consumer at every
micro-batch.
Optimized (optimized_event_dependencies.py): events instead of the syncs; the host still issues 64
GEMMs, 32 event records and 32 waits a call (~3.6 ms of host time against ~1.06 ms of kernels on an
H200, profiled: the GPU waits on the host).
This variant: setup() captures that same run() (``aisp.kits.graphs.GraphReplay``) - the fork onto the producer and
consumer streams, each event record and wait, the join - so the events become the graph's edges:
y[i] -> z[i], and each stream's kernels in its order. run() is one ``replay()``: the host leaves the
critical path, and stage 2 of i still runs beside stage 1 of i+1 where the GPU has room (chapter 12
covers graphs). Same GEMMs, same buffers, same outputs.
Expect: measured, H200, 2026-12-01 (two runs of 20 samples): 1.1404 / 1.1433 ms against the event
variant's 1.9058 / 2.1850 in the same runs, 76.9% / 76.7% of the 0.88 ms compute ceiling (estimated
0.95-1.1 ms): the two chains barely overlap, as each stage's GEMM fills the GPU (pitfall 5).
Run: python ch11/optimized_event_dependencies_graph.py  |  aisp bench run -t ch11:event_dependencies
"""

from __future__ import annotations

import torch
from optimized_event_dependencies import EventPipeline

import aisp
from aisp.kits.graphs import GraphReplay


class GraphedEventPipeline(GraphReplay, EventPipeline):
    scratch = (*EventPipeline.scratch, "out")  # out: the graph's output, z

    def setup(self) -> None:
        super().setup()
        self.capture()

    def forward(self) -> torch.Tensor:
        """The work the graph holds: the event-ordered run() of the variant above."""
        return EventPipeline.run(self)


def get_benchmark() -> aisp.Benchmark:
    return GraphedEventPipeline()


if __name__ == "__main__":
    aisp.main(get_benchmark)
