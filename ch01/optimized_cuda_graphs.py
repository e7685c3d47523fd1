"""Optimized CUDA graphs: the same 200 tiny kernels captured once and replayed with one launch.

Baseline (baseline_cuda_graphs.py): 200 eager launches, each paying Python, dispatcher and
driver time while the GPU idles.
Optimized: setup() captures the 200 kernels into a CUDA graph (static input and output
addresses); run() is one ``graph.replay()``, and the GPU runs the nodes back to back. Same
kernels, same bytes; only the host's per-kernel cost goes.
Expect: 6-11x on an H200; the replay should approach the graph launch floor that
``aisp peak`` measures (~1 us per kernel). Measured (H200, 2026-11-29): 1.9515 -> 0.2452 ms, 7.97x
[7.43, 8.55], 1.23 us per kernel: 61% of its latency ceiling (150 us: one graph launch, one node and
199 dependent nodes at the measured 0.73 us a one-thread node; 44% when they were priced as empty
nodes, in the 2026-11-28 book run).
Run: python ch01/optimized_cuda_graphs.py  |  aisp bench run -t ch01:cuda_graphs
"""

from __future__ import annotations

import torch
from baseline_cuda_graphs import EagerLayers
from ch01_common import capture

import aisp


class GraphLayers(EagerLayers):
    scratch = ("out",)

    def setup(self) -> None:
        super().setup()
        self.graph, self.out = capture(self.layers, self.device)

    def run(self) -> torch.Tensor:
        self.graph.replay()
        return self.out


def get_benchmark() -> aisp.Benchmark:
    return GraphLayers()


if __name__ == "__main__":
    aisp.main(get_benchmark)
