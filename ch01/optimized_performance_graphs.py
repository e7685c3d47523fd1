"""Optimized performance basics (graphs): each micro-batch's forward and backward replayed as one CUDA graph.

Baseline (baseline_performance.py): every micro-batch launches ~20 kernels one by one from
Python and autograd, each paying the host's launch cost (~6 us eager on an H200).
Optimized: the forward and backward of one micro-batch are captured once in setup() on static
input buffers (a graph needs fixed addresses, so the buffers and gradients are preallocated as
in the prealloc variant) and replayed with one launch per micro-batch. Copies (pageable) and
the SGD step stay as in the baseline.
Expect: 7-7.5x on an H200: eager forward+backward costs the host ~1 ms per micro-batch, a
replay ~70 us of GPU time; what is left is mostly the pageable copies (goodput ~50%).
Run: python ch01/optimized_performance_graphs.py  |  aisp bench run -t ch01:performance
"""

from __future__ import annotations

import torch
from baseline_performance import CUDA_WORKLOAD, TrainingLoop
from ch01_common import capture
from optimized_performance_prealloc import PreallocLoop

import aisp


class GraphLoop(PreallocLoop):
    workload = CUDA_WORKLOAD

    def setup(self) -> None:
        super().setup()
        grads = [p.grad for p in self.model.parameters()]
        self.graph, _ = capture(self.captured, self.device)
        if any(p.grad is not g for p, g in zip(self.model.parameters(), grads, strict=True)):
            raise RuntimeError("capture replaced a gradient tensor: replays would not accumulate into it")

    def captured(self) -> None:
        """The work one replay does: this micro-batch's forward and backward on the static buffers."""
        TrainingLoop.forward_backward(self, self.x_dev, self.y_dev)

    def forward_backward(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.graph.replay()


def get_benchmark() -> aisp.Benchmark:
    return GraphLoop()


if __name__ == "__main__":
    aisp.main(get_benchmark)
