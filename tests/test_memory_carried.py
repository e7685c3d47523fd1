"""Peak memory counts the state earlier calls left on a variant (gradients, optimizer moments, buffers
made on a first call), which a call may free before it allocates anew; and the judge compares peaks only
with history counted the same way."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from aisp.harness import execute
from aisp.harness.benchmark import Benchmark
from aisp.harness.verify import held_bytes
from aisp.judge.regression import figures


class Holder(Benchmark):
    """Attributes of every kind held_bytes walks."""

    def setup(self) -> None:
        self.model = torch.nn.Linear(4, 8)  # 32 + 8 floats of parameters
        self.model.register_buffer("scale", torch.ones(2))
        self.opt = torch.optim.Adam(self.model.parameters())
        self.view = self.model.weight[:2]  # shares the weight's storage: counted once
        self.pair = [torch.zeros(3), {"deep": torch.zeros(5)}]

    def run(self) -> torch.Tensor:
        self.opt.zero_grad(set_to_none=True)
        self.model(torch.ones(1, 4)).sum().backward()
        self.opt.step()
        return self.model.weight


def test_held_bytes_counts_parameters_gradients_buffers_optimizer_state_and_containers_once() -> None:
    bench = Holder()
    bench.setup()
    setup = (32 + 8 + 2 + 3 + 5) * 4
    assert held_bytes(bench, "cpu") == setup
    bench.run()  # gradients (40 floats) and Adam's two moments (80) and step counts (2 scalars)
    assert held_bytes(bench, "cpu") == setup + (40 + 80 + 2) * 4
    assert held_bytes(bench, "cuda") == 0  # another device's tensors are not this device's


class FakeAllocator:
    """torch.cuda's allocated / peak counters, moved by hand."""

    def __init__(self, allocated: int) -> None:
        self.allocated = self.peak = allocated

    def move(self, delta: int) -> None:
        self.allocated += delta
        self.peak = max(self.peak, self.allocated)


class StepThatFreesItsGradients(Benchmark):
    """A training call: frees the previous call's 100 B of gradients, then rises 250 B (activations and
    new gradients), then drops back to leaving 100 B of gradients."""

    def __init__(self, fake: FakeAllocator, keep: bool) -> None:
        self.fake, self.keep = fake, keep

    def run(self) -> None:
        if not self.keep:
            self.fake.move(-100)
        self.fake.move(250)
        self.fake.move(-250 if self.keep else -150)


@pytest.mark.parametrize(("keep", "expected"), [(False, 1000 + 250), (True, 1000 + 100 + 250)])
def test_the_peak_counts_the_state_a_call_frees_before_it_allocates(monkeypatch, keep, expected) -> None:
    """Setup kept 1,000 B; earlier calls left 100 B of gradients (carried). Freed first (set_to_none),
    the call's true peak is 1,000 + 250; kept (zeroed in place), 1,000 + 100 + 250. Counting only the
    rise over what was allocated before the call read 1,150 in the first case."""
    fake = FakeAllocator(5000 + 1000 + 100)  # another variant's 5,000 B, this one's setup and gradients
    stubs = {"memory_allocated": lambda d=None: fake.allocated, "max_memory_allocated": lambda d=None: fake.peak,
             "memory_reserved": lambda d=None: 0, "max_memory_reserved": lambda d=None: 0,
             "reset_peak_memory_stats": lambda d=None: setattr(fake, "peak", fake.allocated),
             "synchronize": lambda d=None: None, "empty_cache": lambda: None, "mem_get_info": lambda d=None: (0, 0)}
    for name, stub in stubs.items():  # torch.cuda's counters, as test_harness_pairs stubs them
        monkeypatch.setattr(torch.cuda, name, stub)
    monkeypatch.setattr(execute, "nvml_memory_reader", lambda d: None)
    monkeypatch.setattr(execute, "held_bytes", lambda bench, kind: 300 + 100)  # 300 after setup, + gradients
    var = execute.Variant(Path("optimized_x.py"))
    var.bench, var.held_after_setup, var.memory["setup_bytes"] = StepThatFreesItsGradients(fake, keep), 300, 1000
    execute.measure_memory(var, torch.device("cuda"))
    assert var.memory["carried_bytes"] == 100
    assert var.memory["peak_bytes"] == expected
    assert var.memory["peak_method"] == execute.PEAK_METHOD


def _memory_result(base_peak: int, opt_peak: int, method: str | None) -> dict:
    memory = {"peak_method": method} if method else {}
    variant = {"verdict": "ok", "samples_ms": [1.0] * 10, "summary": {"median": 1.0}}
    return {"workload": {"headline": "memory"}, "speedup": {"value": base_peak / opt_peak, "high": base_peak / opt_peak},
            "baseline": {**variant, "name": "baseline", "memory": {"peak_bytes": base_peak, **memory}},
            "variants": [{**variant, "name": "optimized", "memory": {"peak_bytes": opt_peak, **memory}}]}


def _entry(runs: int = 3) -> dict:
    old = {"speedup": 3.0, "best": "optimized", "baseline_ms": 1.0, "optimized_ms": 1.0,
           "baseline_peak_bytes": 6e9, "optimized_peak_bytes": 2e9}
    return {"best": "optimized", "history": [dict(old) for _ in range(runs)], "noise": {}}


def test_peaks_counted_a_new_way_are_not_judged_against_the_old_ones() -> None:
    """A history counted before carried state was (no method stored) does not judge peaks that count it:
    no ratio and no peak figure, only the times. Counted the same way, the same shift is judged."""
    newer = _memory_result(int(6.4e9), int(2.4e9), execute.PEAK_METHOD)
    labels = [f.label for f in figures(newer, _entry())]
    assert not any("ratio" in label or "peak" in label for label in labels) and labels
    older = _memory_result(int(6.4e9), int(2.4e9), None)
    judged = {f.label: f for f in figures(older, _entry())}
    assert "memory ratio" in judged and "optimized peak memory" in judged


class SgdStep(Benchmark):
    """One SGD step of a 4,096 x 4,096 fp32 linear layer (64 MiB of weights) that frees the previous
    step's gradients first, as training loops do."""

    def setup(self) -> None:
        self.model = torch.nn.Linear(4096, 4096, device=self.device)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=1e-3)
        self.x = torch.randn(64, 4096, device=self.device)

    def run(self) -> torch.Tensor:
        self.opt.zero_grad(set_to_none=True)
        self.model(self.x).sum().backward()
        self.opt.step()
        return self.model.bias


@pytest.mark.gpu
def test_a_training_steps_peak_counts_the_gradients_it_frees_first_on_gpu() -> None:
    """Weights and gradients coexist at the step: the peak holds both. Counted as the call's rise over
    what was allocated before it (the previous gradients included), it read about the weights alone."""
    device = torch.device("cuda")
    bench = SgdStep()
    bench.device, bench.seed = device, 0
    var = execute.Variant(Path("baseline_sgd.py"))
    before = torch.cuda.memory_allocated(device)
    bench.setup()
    var.bench, var.memory["setup_bytes"] = bench, torch.cuda.memory_allocated(device) - before
    var.held_after_setup = held_bytes(bench, "cuda")
    for _ in range(2):
        bench.run()
    execute.measure_memory(var, device)
    weights = sum(p.numel() * p.element_size() for p in bench.model.parameters())
    print(var.memory)
    assert var.memory["carried_bytes"] == weights  # the gradients: one per parameter, same size
    assert var.memory["peak_bytes"] >= 2 * weights
    assert var.memory["peak_bytes"] - var.memory["carried_bytes"] < 2 * weights  # what the old count gave
