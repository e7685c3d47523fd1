"""A benchmark's whole call as one CUDA graph: captured once in setup, replayed per call."""

from __future__ import annotations

import torch


class GraphReplay:
    """Mixin for an ``aisp.Benchmark`` (put it first among the bases) whose call is ``forward()``:
    ``capture()`` runs ``forward()`` once on a side stream (compiles, autotunes, plans), then
    captures it in a CUDA graph whose output is ``self.out``; ``run()`` replays the graph and
    returns ``self.out``, or calls ``forward()`` eagerly where nothing is captured (a CPU, or a
    warm-up before ``capture()``). The graph reads its inputs at their addresses, which the harness
    refills in place. A ``forward()`` that falls back to a parent's ``run()`` names the parent
    (``Parent.run(self)``): ``super().run()`` would reach this one."""

    graph: torch.cuda.CUDAGraph | None = None

    def forward(self) -> torch.Tensor:
        raise NotImplementedError

    def capture(self) -> None:
        self.graph = None
        if self.device.type != "cuda":
            return
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            self.forward()  # warm up off the capture
        torch.cuda.current_stream(self.device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.out = self.forward()

    def run(self) -> torch.Tensor:
        if self.graph is None:
            return self.forward()
        self.graph.replay()
        return self.out

    def teardown(self) -> None:
        self.graph = None
        super().teardown()
