"""Baseline CUDA graphs: 200 tiny kernels launched one by one from Python.

Baseline: 100 layers of ``h = tanh(shift[i] + h * scale[i])`` on 4,096 floats: 200 kernels of
about a microsecond of GPU work each, every one launched eagerly (Python, the dispatcher and
the driver: ~5-7 us of host time per launch). The GPU idles between kernels; launch-bound.
Optimized (optimized_cuda_graphs.py): the same 200 kernels captured once into a CUDA graph in
setup() and replayed with one launch; the GPU walks the graph back to back (~1 us per node).
Expect: 6-11x on an H200 (8-14 us per kernel eager, Python indexing included, varying with
the host between runs, vs ~1.2 us per node replayed: launch overhead down 85-90%, more than
the seed's 50-70%).
Run: python ch01/baseline_cuda_graphs.py  |  aisp bench run -t ch01:cuda_graphs
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import aisp


@dataclass(frozen=True, kw_only=True)
class LaunchWorkload(aisp.Workload):
    layers: int = 100
    width: int = 4096


def _launch_workload() -> LaunchWorkload:
    shape = LaunchWorkload()
    vec = 4.0 * shape.width
    # Per layer: addcmul reads h, scale, shift and writes h; tanh reads and writes h.
    # Latency: every kernel but the first (which reads h0) reads the h the kernel before it wrote.
    return LaunchWorkload(flops=3.0 * shape.layers * shape.width, bytes=6.0 * shape.layers * vec,
                          latency=aisp.LatencyCounts(graph_launches=1, graph_nodes=1,
                                                     dependent_graph_nodes=2 * shape.layers - 1),
                          items=2 * shape.layers, item_unit="kernels", precision="fp32",
                          ceiling_note="profiled (torch profiler, H200): _pdl's 200 kernels 208 us a replay, 1.04 us each against the 0.73 us graph-node floor",
                          requires=aisp.Requirements(cuda=True),
                          window="idle")


WORKLOAD = _launch_workload()


class EagerLayers(aisp.Benchmark):
    """Launches every layer's two kernels from Python."""

    workload = WORKLOAD
    inputs = ("h0",)

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        self.h0 = torch.randn(w.width, device=self.device, generator=gen)
        self.scale = 1.0 + 0.1 * torch.randn(w.layers, w.width, device=self.device, generator=gen)
        self.shift = 0.1 * torch.randn(w.layers, w.width, device=self.device, generator=gen)

    def layers(self) -> torch.Tensor:
        h = self.h0
        for i in range(self.workload.layers):
            h = torch.tanh(torch.addcmul(self.shift[i], h, self.scale[i]))
        return h

    def run(self) -> torch.Tensor:
        return self.layers()


def get_benchmark() -> aisp.Benchmark:
    return EagerLayers()


if __name__ == "__main__":
    aisp.main(get_benchmark)
