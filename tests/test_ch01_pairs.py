"""Chapter 1 pairs on the CPU: every variant matches its baseline, leaves its inputs alone and
documents itself; CUDA-only pairs report why they skip."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest
import torch
from conftest import variant_modules
from refill_check import check_refilled_pair

import aisp
from aisp.harness.benchmark import unmet_requirements
from aisp.harness.loader import import_module_at
from aisp.harness.verify import compare

CH01 = Path(__file__).resolve().parents[1] / "ch01"


def pair_files() -> list[tuple[str, str]]:
    """(baseline module, optimized module) for every optimized file in ch01."""
    return variant_modules(CH01)


def load(module: str) -> ModuleType:
    return import_module_at(CH01 / f"{module}.py")


SMALL = {"preallocated_buffers": {"steps": 8, "rows": 256, "dim": 256}}
"""Per pair, CPU sizes (the same code): 64 steps of 1024 x 1024 tiles, 256 MiB of inputs a side, took
CI 28 s for one test."""


def build(module: str, seed: int) -> aisp.Benchmark:
    bench = load(module).get_benchmark()
    bench.device, bench.seed = torch.device("cpu"), seed
    if small := SMALL.get(module.split("_", 1)[1]):
        bench.workload = replace(bench.workload, **small)
    return bench


def inputs(bench: aisp.Benchmark) -> dict[str, torch.Tensor]:
    found = {}
    for key, value in vars(bench).items():
        items = value if isinstance(value, (list, tuple)) else [value]
        if key not in bench.scratch:
            found.update({f"{key}[{i}]": t.clone() for i, t in enumerate(items) if isinstance(t, torch.Tensor)})
    return found


def as_tuple(out: object) -> tuple[torch.Tensor, ...]:
    if isinstance(out, dict):
        return tuple(out[k] for k in sorted(out))
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def runs_on_cpu(module: str) -> bool:
    return unmet_requirements(load(module).get_benchmark().workload.requires, torch.device("cpu")) is None


CPU_PAIRS = [p for p in pair_files() if runs_on_cpu(p[0]) and runs_on_cpu(p[1])]
GPU_PAIRS = [p for p in pair_files() if p not in CPU_PAIRS]


@pytest.mark.parametrize(("baseline", "optimized"), CPU_PAIRS)
@pytest.mark.parametrize("seed", [0, 1])
def test_cpu_pair_matches_and_keeps_inputs(baseline: str, optimized: str, seed: int) -> None:
    outs = []
    for module in (baseline, optimized):
        bench = build(module, seed)
        bench.setup()
        before = inputs(bench)
        outs.append(as_tuple(bench.run()))
        assert inputs(bench).keys() == before.keys()
        for key, value in inputs(bench).items():
            assert torch.equal(before[key], value), f"{module} changed input {key}"
        bench.teardown()
    w = load(baseline).WORKLOAD
    for ref, got in zip(*outs, strict=True):
        assert ref.shape == got.shape and ref.dtype == got.dtype
        compare([("output", ref)], [("output", got)], w)


@pytest.mark.parametrize(("baseline", "optimized"), CPU_PAIRS)
def test_cpu_pair_matches_on_refilled_inputs(baseline: str, optimized: str) -> None:
    check_refilled_pair(build(baseline, 0), build(optimized, 0), load(baseline).WORKLOAD)


@pytest.mark.parametrize(("baseline", "optimized"), GPU_PAIRS)
def test_gpu_pair_skips_with_reason_on_cpu(baseline: str, optimized: str) -> None:
    reason = unmet_requirements(build(optimized, 0).workload.requires, torch.device("cpu"))
    assert reason and "CUDA" in reason


@pytest.mark.parametrize("module", [m for p in pair_files() for m in p])
def test_pair_file_documents_itself(module: str) -> None:
    doc = load(module).__doc__ or ""
    for line in ("Baseline", "Optimized", "Expect:", "Run:"):
        assert line in doc, f"{module} docstring lacks '{line}'"


def test_seeds_give_different_inputs() -> None:
    a, b = build("baseline_preallocated_buffers", 0), build("baseline_preallocated_buffers", 1)
    a.setup()
    b.setup()
    assert not torch.equal(a.run(), b.run())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(("baseline", "optimized"), pair_files())
def test_pair_matches_on_gpu(baseline: str, optimized: str) -> None:
    outs = []
    for module in (baseline, optimized):
        bench = load(module).get_benchmark()
        bench.device, bench.seed = torch.device("cuda"), 3
        bench.setup()
        outs.append([t.detach().clone() for t in as_tuple(bench.run())])
        bench.teardown()
    w = load(baseline).WORKLOAD
    for ref, got in zip(*outs, strict=True):
        compare([("output", ref)], [("output", got)], w)


def metrics_of(module: str, device: str) -> dict[str, float]:
    bench = load(module).get_benchmark()
    bench.device, bench.seed = torch.device(device), 0
    bench.setup()
    bench.run()
    return bench.metrics()


def test_no_goodput_on_cpu() -> None:
    assert metrics_of("optimized_performance_batch", "cpu") == {}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_goodput_counts_kernels_inside_cuda_graphs() -> None:
    """Goodput is kernel time / loop time: a fraction, and higher once the host is out of the way.
    If the profiler missed the kernels a graph replays, the graph variants would score near zero."""
    base = metrics_of("baseline_performance", "cuda")
    for module in ("optimized_performance_graphs", "optimized_performance_combined"):
        opt = metrics_of(module, "cuda")
        assert 0 < base["goodput"] < opt["goodput"] <= 1.05, (base, opt)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_double_buffering_hides_the_copies() -> None:
    assert metrics_of("baseline_double_buffering", "cuda")["hidden_fraction"] < 0.2
    assert metrics_of("optimized_double_buffering", "cuda")["hidden_fraction"] > 0.5
