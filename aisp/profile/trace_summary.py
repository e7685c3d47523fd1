"""Summarizing a torch.profiler Chrome trace: top kernels, launches, host gaps, GPU busy, goodput.

The window is the span of the trace's ``record_function`` ranges (each profiled iteration is one),
stretched to cover device work they launched; without ranges, the span of all ops. On the device
with the most kernel time: GPU busy = union of kernel, memcpy and memset intervals / window;
goodput = union of kernel intervals alone (useful compute) / window.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from aisp.profile.trace_events import (
    DEVICE_WORK,
    DRIVER_LAUNCH,
    GRAPH_LAUNCH,
    RUNTIME_LAUNCH,
    Event,
    Interval,
    clip,
    covered,
    gaps_between,
    load_events,
    self_times,
    top_level,
)
from aisp.profile.trace_findings import DEFAULT_THRESHOLDS, Thresholds, TraceNumbers, findings

TOP_N = 10


@dataclass(frozen=True)
class NameStat:
    """Time of one kernel or op name: calls, total µs and share of the kind's total."""

    name: str
    count: int
    total_us: float
    pct: float


@dataclass(frozen=True)
class GapStats:
    """Device idle gaps between consecutive kernels longer than ``threshold_us``."""

    threshold_us: float
    count: int
    total_us: float
    max_us: float


@dataclass(frozen=True)
class TraceSummary:
    """The numbers a performance engineer reads first in a trace (times in µs)."""

    path: str
    device: str
    """``cuda`` when the trace holds device work, else ``cpu``."""
    window_us: float
    iterations: int | None
    """``ProfilerStep#N`` ranges in the trace, when it was captured with a schedule."""
    kernel_count: int
    kernel_us: float
    top_kernels: tuple[NameStat, ...]
    launch_count: int
    """Kernel launch API calls on the host (runtime, or driver calls not inside a runtime call)."""
    graph_launch_count: int
    memcpy_count: int
    gaps: GapStats
    gpu_busy_fraction: float | None
    goodput: float | None
    empty_strided_us: float
    empty_strided_calls: int
    empty_strided_share: float
    top_cpu_ops: tuple[NameStat, ...]
    """ATen ops by self CPU time."""
    host_op_fraction: float
    """Share of the window covered by top-level ATen ops on the host."""
    findings: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (tuples become lists)."""
        return asdict(self) | {"findings": list(self.findings)}


def summarize_trace(path: Path, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> TraceSummary:
    """Read the Chrome trace at ``path`` and compute its summary and findings."""
    events = load_events(path)
    work = _primary_device_work(events)
    window = _window(events, work)
    span = window[1] - window[0]
    kernels = [e for e in work if e.cat == "kernel"]
    ops = [e for e in events if e.cat == "cpu_op"]
    busy = covered(clip(((e.start, e.end) for e in work), window)) if work else None
    useful = covered(clip(((e.start, e.end) for e in kernels), window)) if work else None
    gaps = _gaps(kernels, work, window, thresholds.gap_us)
    empties = top_level([e for e in ops if e.name == "aten::empty_strided"])
    empty_us = sum((e.dur for e in empties), 0.0)
    host_ops = covered(clip(((e.start, e.end) for e in top_level(ops)), window))
    base = TraceSummary(
        path=str(path), device="cuda" if work else "cpu", window_us=span,
        iterations=_iterations(events), kernel_count=len(kernels), kernel_us=sum((e.dur for e in kernels), 0.0),
        top_kernels=_by_name(kernels, {i: e.dur for i, e in enumerate(kernels)}),
        launch_count=_launches(events), graph_launch_count=sum(e.name in GRAPH_LAUNCH for e in events),
        memcpy_count=sum(e.cat == "gpu_memcpy" for e in work), gaps=gaps,
        gpu_busy_fraction=_ratio(busy, span), goodput=_ratio(useful, span),
        empty_strided_us=empty_us, empty_strided_calls=len(empties),
        empty_strided_share=empty_us / span if span > 0 else 0.0,
        top_cpu_ops=_by_name(ops, self_times(ops)), host_op_fraction=host_ops / span if span > 0 else 0.0,
    )
    return _with_findings(base, kernels, thresholds)


def _with_findings(s: TraceSummary, kernels: list[Event], t: Thresholds) -> TraceSummary:
    durations = [e.dur for e in kernels]
    numbers = TraceNumbers(
        window_us=s.window_us, device=s.device == "cuda", kernel_count=s.kernel_count,
        small_kernels=sum(d < t.small_kernel_us for d in durations),
        median_kernel_us=statistics.median(durations) if durations else 0.0,
        gap_count=s.gaps.count, gap_total_us=s.gaps.total_us, gap_max_us=s.gaps.max_us,
        gpu_busy=s.gpu_busy_fraction, empty_strided_us=s.empty_strided_us,
        empty_strided_calls=s.empty_strided_calls, host_op_fraction=s.host_op_fraction)
    return replace(s, findings=tuple(findings(numbers, t)))


def _primary_device_work(events: list[Event]) -> list[Event]:
    """Device work (kernels, copies, sets) of the device with the most kernel time."""
    per_device: dict[Any, list[Event]] = defaultdict(list)
    for e in events:
        if e.cat in DEVICE_WORK:
            per_device[e.pid].append(e)
    if not per_device:
        return []
    return max(per_device.values(), key=lambda evs: sum(e.dur for e in evs if e.cat == "kernel"))


def _window(events: list[Event], work: list[Event]) -> Interval:
    marks = [e for e in events if e.cat == "user_annotation"]
    if not marks:
        marks = [e for e in events if e.cat in ("cpu_op", "cuda_runtime", "cuda_driver")] + work
    if not marks:
        return (0.0, 0.0)
    start, end = min(e.start for e in marks), max(e.end for e in marks)
    launched_inside = [e for e in work if e.start >= start]
    return (start, max([end] + [e.end for e in launched_inside]))


def _gaps(kernels: list[Event], work: list[Event], window: Interval, threshold: float) -> GapStats:
    """Gaps between consecutive kernels where no device work (kernel, copy, set) runs."""
    if not kernels:
        return GapStats(threshold, 0, 0.0, 0.0)
    inside = clip(((e.start, e.end) for e in work), window)
    long = [g for g in gaps_between(inside) if g > threshold]
    return GapStats(threshold, len(long), sum(long, 0.0), max(long, default=0.0))


def _launches(events: list[Event]) -> int:
    calls = [e for e in events if e.name in RUNTIME_LAUNCH or e.name in DRIVER_LAUNCH]
    return len(top_level(calls))


def _iterations(events: list[Event]) -> int | None:
    steps = {e.name for e in events if e.cat == "user_annotation" and e.name.startswith("ProfilerStep#")}
    return len(steps) or None


def _by_name(events: list[Event], times: dict[int, float]) -> tuple[NameStat, ...]:
    count: dict[str, int] = defaultdict(int)
    total: dict[str, float] = defaultdict(float)
    for i, e in enumerate(events):
        count[e.name] += 1
        total[e.name] += times[i]
    grand = sum(total.values())
    ranked = sorted(total, key=total.__getitem__, reverse=True)[:TOP_N]
    return tuple(NameStat(n, count[n], total[n], 100.0 * total[n] / grand if grand else 0.0) for n in ranked)


def _ratio(part: float | None, whole: float) -> float | None:
    if part is None or whole <= 0:
        return None
    return part / whole
