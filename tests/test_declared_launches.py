"""No pair declares more launches or dispatches than its variants really make (issue 30).

A latency count is priced at its floor and the pair's ceiling is the tightest bound, so a larger
count raises the % of its ceiling a pair reaches: over-counting is the dishonest direction. For every
pair whose workload declares ``launches`` or ``dispatches`` (DECLARING, held to the chapters), each
variant's ``run()`` is called once under a counter and the declared launches + dispatches must not
exceed the fewest any variant makes (the fastest variant is one of them). On a CPU the counter is
the non-view aten ops dispatched (tests/test_latency_ceilings.py's ``kernels``: a view launches
nothing, every other op launches at least one kernel on a GPU); a pair that needs CUDA is skipped
there with the reason. On a GPU (the ``gpu`` test) it is the kernels and copies the profiler sees,
since a ctypes, Triton or cuBLAS launch made outside the dispatcher is no aten op. The fixture pair
tests/fixtures/latency_counts declares more than its optimized variant dispatches and must fire.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import REPO
from test_ceilings_declared import workload_of
from test_latency_ceilings import kernels

from aisp.harness.discovery import Pair, chapters, pairs_in
from aisp.harness.execute import workload_dict
from aisp.harness.loader import load_benchmark

DECLARING = ("ch01:gemm", "ch01:preallocated_buffers", "ch04:small_allreduce_multigpu", "ch12:dynamic_parallelism",
             "ch14:custom_op_graph_break", "ch17:vectorized_router")
"""Every pair whose workload declares launches or dispatches."""
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "latency_counts"

Counter = Callable[[Callable[[], object]], int]
"""Counts the launch-like events of one call (aten ops on a CPU, profiled device events on a GPU)."""


def declared(workload: dict[str, Any]) -> int:
    """The launches + dispatches a workload (as a result holds it) declares."""
    counts = workload.get("latency") or {}
    return int(counts.get("launches") or 0) + int(counts.get("dispatches") or 0)


def overcount(target: str, claimed: int, made: dict[str, int]) -> str | None:
    """Why ``claimed`` is dishonest (more than the fewest events a variant made), or None."""
    fewest = min(made, key=made.__getitem__)
    if claimed <= made[fewest]:
        return None
    return f"{target} declares {claimed} launches + dispatches; {fewest} makes {made[fewest]}"


def events_by_variant(pair: Pair, device: torch.device, count: Counter) -> dict[str, int]:
    """Each variant's events in one ``run()`` after its ``setup()`` on ``device``."""
    made = {}
    for path in [pair.baseline, *pair.optimized]:
        bench = load_benchmark(path)
        bench.device, bench.seed = device, 0
        bench.setup()
        try:
            made[path.stem] = count(bench.run)
        finally:
            bench.teardown()
    return made


def pair_of(folder: Path, name: str) -> Pair:
    return next(p for p in pairs_in(folder) if p.name == name)


def chapter_pair(target: str) -> Pair:
    chapter, name = target.split(":")
    return pair_of(REPO / chapter, name)


def device_events(fn: Callable[[], object]) -> int:
    """The kernels, copies and memsets the profiler sees on the GPU during ``fn()``."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(e.device_type == torch.autograd.DeviceType.CUDA for e in prof.events())


def test_the_list_is_every_pair_declaring_launches_or_dispatches():
    found = set()
    for folder in chapters(REPO).values():
        for pair in pairs_in(folder):
            workload = workload_of(pair.target)
            if workload is not None and declared(workload):
                found.add(pair.target)
    assert found == set(DECLARING), f"add to or drop from DECLARING: {sorted(found ^ set(DECLARING))}"


@pytest.mark.parametrize("target", DECLARING)
def test_declared_launches_do_not_exceed_the_ops_dispatched_on_a_cpu(target):
    workload = workload_of(target)
    assert workload is not None, f"{target} cannot be imported here"
    if workload["requires"]["cuda"]:
        pytest.skip(f"{target} needs CUDA; the gpu test counts the kernels it launches")
    if max(workload["requires"]["gpus"], workload["requires"]["ranks"]) > 1:
        pytest.skip(f"{target} runs as several ranks")
    made = events_by_variant(chapter_pair(target), torch.device("cpu"), kernels)
    assert overcount(target, declared(workload), made) is None


@pytest.mark.gpu
@pytest.mark.parametrize("target", DECLARING)
def test_declared_launches_do_not_exceed_the_kernels_a_gpu_runs(target):
    workload = workload_of(target)
    assert workload is not None, f"{target} cannot be imported here"
    if max(workload["requires"]["gpus"], workload["requires"]["ranks"]) > 1:
        pytest.skip(f"{target} runs as several ranks (its run() needs their process group)")
    made = events_by_variant(chapter_pair(target), torch.device("cuda"), device_events)
    assert overcount(target, declared(workload), made) is None


def test_the_check_fires_on_a_pair_that_declares_more_than_it_dispatches():
    pair = pair_of(FIXTURES, "overcounted")
    made = events_by_variant(pair, torch.device("cpu"), kernels)
    assert made == {"baseline_overcounted": 3, "optimized_overcounted": 1}
    claimed = declared(workload_dict(load_benchmark(pair.baseline).workload))
    assert overcount(pair.target, claimed, made) == \
        "latency_counts:overcounted declares 2 launches + dispatches; optimized_overcounted makes 1"
    assert overcount(pair.target, 1, made) is None
