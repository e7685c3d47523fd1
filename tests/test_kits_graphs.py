"""aisp.kits.graphs.GraphReplay on a CPU: nothing is captured, so run() is the subclass's forward()
and overrides the parent benchmark's run(); a forward() that names the parent reaches its run()."""

from __future__ import annotations

import torch

from aisp.kits.graphs import GraphReplay


class Parent:
    device = torch.device("cpu")

    def run(self) -> torch.Tensor:
        return torch.zeros(2)

    def teardown(self) -> None:
        self.torn_down = True


class Replayed(GraphReplay, Parent):
    def setup(self) -> None:
        self.calls = 0
        self.capture()

    def forward(self) -> torch.Tensor:
        self.calls += 1
        return Parent.run(self) + self.calls


def test_without_cuda_run_is_forward_and_nothing_is_captured() -> None:
    bench = Replayed()
    bench.setup()
    assert bench.graph is None and bench.calls == 0
    assert torch.equal(bench.run(), torch.ones(2)) and torch.equal(bench.run(), torch.full((2,), 2.0))
    bench.teardown()
    assert bench.graph is None and bench.torn_down
