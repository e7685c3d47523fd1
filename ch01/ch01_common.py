"""Small helpers shared by chapter 1's pairs (not a pair itself)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch


def seconds(fn: Callable[[], object], device: torch.device, repeats: int = 3) -> float:
    """Median wall time of ``fn()`` between device-wide syncs."""
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def capture(fn: Callable[[], object], device: torch.device, warmup: int = 3) -> tuple[torch.cuda.CUDAGraph, object]:
    """Warm ``fn`` up on a side stream (lazy inits must not happen under capture), then capture it.

    Returns the graph and what ``fn`` returned during capture (tensors in the graph's pool that
    every replay rewrites).
    """
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


def kernel_seconds(fn: Callable[[], object], device: torch.device) -> float:
    """GPU time spent in kernels while ``fn()`` runs (copies and memsets excluded), from the profiler."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize(device)
    spans = [e.time_range.elapsed_us() for e in prof.events()
             if e.device_type == DeviceType.CUDA and not e.name.startswith(("Memcpy", "Memset"))]
    return sum(spans) / 1e6
