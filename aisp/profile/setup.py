"""Variants loaded, set up and warmed in this process for a profiler: what ``aisp profile run`` (one
process) and :mod:`aisp.profile.ranks` (every rank of a multi-rank pair) share."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from aisp.harness.benchmark import Benchmark, unmet_requirements
from aisp.harness.loader import load_benchmark
from aisp.harness.timing import synchronize


def set_up_here(files: dict[str, Path], warmup: int,
                work: Callable[[dict[str, Benchmark]], dict[str, Any]]) -> dict[str, Any]:
    """``work`` on every variant of ``files`` (the baseline first, or one variant) loaded, set up and
    warmed in this process, all torn down after; every variant ``{"skipped": reason}`` where the pair
    cannot run here."""
    benches = {name: load_benchmark(path) for name, path in files.items()}
    first = next(iter(benches.values()))  # the baseline, or the one variant set up alone
    reason = unmet_requirements(first.workload.requires, first.device)
    if reason:
        return {name: {"skipped": reason} for name in files}
    _set_up(benches, warmup)
    try:
        return work(benches)
    finally:
        for bench in benches.values():
            bench.teardown()


def _set_up(benches: dict[str, Benchmark], warmup: int) -> None:
    for bench in benches.values():
        bench.seed = 0
        bench.setup()
        for _ in range(warmup):
            bench.run()
        synchronize(bench.device)
