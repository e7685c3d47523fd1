"""Reading a torch.profiler Chrome trace: its duration events by kind, and interval arithmetic.

Times are microseconds, as in the trace. Kineto categories: ``kernel``, ``gpu_memcpy`` and
``gpu_memset`` run on a device (``pid`` is the device index, ``tid`` the stream); ``cuda_runtime``
and ``cuda_driver`` are host API calls; ``cpu_op`` are ATen ops; ``user_annotation`` are
``record_function`` ranges (including ``ProfilerStep#N``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEVICE_WORK = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
RUNTIME_LAUNCH = frozenset({"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel",
                            "cudaLaunchCooperativeKernelMultiDevice"})
DRIVER_LAUNCH = frozenset({"cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel"})
GRAPH_LAUNCH = frozenset({"cudaGraphLaunch", "cuGraphLaunch"})

Interval = tuple[float, float]


@dataclass(frozen=True)
class Event:
    """One complete ("X") event of the trace."""

    name: str
    cat: str
    start: float
    dur: float
    pid: Any
    tid: Any
    launch: tuple[tuple[int, ...], tuple[int, ...]] | None = None
    """A kernel's (grid, block), where the trace records them."""

    @property
    def end(self) -> float:
        return self.start + self.dur


def load_events(path: Path) -> list[Event]:
    """The complete events of a Chrome trace file (a ``{"traceEvents": [...]}`` object or a bare list)."""
    data = json.loads(Path(path).read_text())
    raw = data.get("traceEvents", []) if isinstance(data, dict) else data
    return [Event(str(e.get("name", "")), str(e.get("cat", "")), float(e["ts"]), float(e.get("dur", 0.0)),
                  e.get("pid"), e.get("tid"), _launch(e.get("args") or {}))
            for e in raw if e.get("ph") == "X" and "ts" in e]


def _launch(args: dict[str, Any]) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    if "grid" in args and "block" in args:
        return tuple(args["grid"]), tuple(args["block"])
    return None


def load_memory_events(path: Path) -> list[dict[str, Any]]:
    """The ``[memory]`` instant events that ``profile_memory=True`` records (allocations and frees)."""
    data = json.loads(Path(path).read_text())
    raw = data.get("traceEvents", []) if isinstance(data, dict) else data
    return [e for e in raw if e.get("ph") == "i" and e.get("name") == "[memory]"]


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """The union of ``intervals`` as sorted, disjoint intervals."""
    merged: list[list[float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def clip(intervals: Iterable[Interval], window: Interval) -> list[Interval]:
    """``intervals`` cut to ``window``; those outside it dropped."""
    lo, hi = window
    return [(max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi]


def covered(intervals: Iterable[Interval]) -> float:
    """Total length of the union of ``intervals``."""
    return sum(e - s for s, e in merge(intervals))


def gaps_between(intervals: Iterable[Interval]) -> list[float]:
    """Idle lengths between consecutive intervals of the union (none before the first or after the last)."""
    merged = merge(intervals)
    return [b[0] - a[1] for a, b in zip(merged, merged[1:], strict=False)]


def self_times(events: list[Event]) -> dict[int, float]:
    """Self time of each event (its duration less its direct children's), by index in ``events``.

    Children are events of the same thread that start and end inside their parent.
    """
    by_thread: dict[tuple[Any, Any], list[int]] = defaultdict(list)
    for i, ev in enumerate(events):
        by_thread[(ev.pid, ev.tid)].append(i)
    result = {i: ev.dur for i, ev in enumerate(events)}
    for indices in by_thread.values():
        stack: list[int] = []
        for i in sorted(indices, key=lambda k: (events[k].start, -events[k].dur)):
            while stack and events[i].start >= events[stack[-1]].end:
                stack.pop()
            if stack and events[i].end <= events[stack[-1]].end:
                result[stack[-1]] -= events[i].dur
            stack.append(i)
    return result


def top_level(events: list[Event]) -> list[Event]:
    """Events not nested inside another of ``events`` on the same thread."""
    outer: list[Event] = []
    last_end: dict[tuple[Any, Any], float] = {}
    for ev in sorted(events, key=lambda e: (e.start, -e.dur)):
        key = (ev.pid, ev.tid)
        if ev.end <= last_end.get(key, float("-inf")):
            continue
        outer.append(ev)
        last_end[key] = max(ev.end, last_end.get(key, float("-inf")))
    return outer
