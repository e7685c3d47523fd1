"""Copied beside a planted pair by tests/planted_slowdown.py: ``planted(get_benchmark, percent)``
returns a factory whose benchmark's ``run()`` is ``percent`` slower (output unchanged)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_ms(run: Callable[[], object], device_type: str, calls: int = 20) -> float:
    """The median time of ``calls`` calls of ``run`` (CUDA events on a GPU, the host clock on a CPU)."""
    import torch

    times = []
    for _ in range(calls):
        if device_type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            run()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            began = time.perf_counter()
            run()
            times.append((time.perf_counter() - began) * 1e3)
    return statistics.median(times)


def spin_for(ms: float, device_type: str) -> Callable[[], None]:
    """A call that adds ``ms`` of work: a one-thread spin on the current CUDA stream, or a host busy loop."""
    import torch

    if device_type == "cuda":
        from aisp.harness.timing import cycles_per_ms

        cycles = int(ms * cycles_per_ms(torch.device("cuda")))
        return lambda: torch.cuda._sleep(cycles)

    def busy() -> None:
        until = time.perf_counter() + ms / 1e3
        while time.perf_counter() < until:
            pass
    return busy


def planted(factory: Callable[[], object], percent: float) -> Callable[[], object]:
    """``factory`` whose benchmarks time their own ``run()`` after setup and add ``percent`` of it to every later call."""
    def make() -> object:
        bench = factory()
        setup, run = bench.setup, bench.run

        def slowed_setup() -> None:
            setup()
            spin = spin_for(median_ms(run, bench.device.type) * percent / 100, bench.device.type)

            def slowed_run() -> object:
                out = run()
                spin()
                return out
            bench.run = slowed_run
        bench.setup = slowed_setup
        return bench
    return make
