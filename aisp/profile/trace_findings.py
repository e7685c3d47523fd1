"""Turning a trace's numbers into the chapter's "what to look for" list.

Each finding starts with a short key (``host-gaps:``, ``small-kernels:``, ``alloc:``, ``gpu-busy:``,
``gpu-idle:``, ``host-overhead:``) followed by the numbers that triggered it and what to try.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Thresholds:
    """When a finding fires. Defaults are the book's rules of thumb."""

    gap_us: float = 10.0
    """A device idle gap between consecutive kernels longer than this counts as a host gap."""
    gap_share: float = 0.2
    """Host gaps summing to at least this share of the window fire ``host-gaps``."""
    small_kernel_us: float = 10.0
    """A kernel shorter than this is small: launch overhead (about 5-20 µs) rivals its work."""
    small_kernel_share: float = 0.5
    """At least this share of kernels being small (with the GPU under ``busy_ok``) fires ``small-kernels``."""
    min_kernels: int = 20
    """Fewer kernels than this in the window are too few to call "many small launches"."""
    empty_strided_share: float = 0.05
    """``aten::empty_strided`` taking at least this share of the window fires ``alloc``."""
    busy_ok: float = 0.8
    """GPU busy at least this share of the window is good (``gpu-busy``); below it, ``gpu-idle``."""
    host_op_share: float = 0.5
    """CPU-only: ATen ops covering less than this share of the window fire ``host-overhead``."""


@dataclass(frozen=True)
class TraceNumbers:
    """What the findings read from a summary (all times in µs)."""

    window_us: float
    device: bool
    kernel_count: int
    small_kernels: int
    median_kernel_us: float
    gap_count: int
    gap_total_us: float
    gap_max_us: float
    gpu_busy: float | None
    empty_strided_us: float
    empty_strided_calls: int
    host_op_fraction: float


DEFAULT_THRESHOLDS = Thresholds()


def findings(n: TraceNumbers, t: Thresholds = DEFAULT_THRESHOLDS) -> list[str]:
    """The messages that fire for ``n`` under thresholds ``t``."""
    rules = (_device_rules(n, t) if n.device else _host_rules(n, t)) + _alloc_rule(n, t)
    return [msg for msg in rules if msg]


def _device_rules(n: TraceNumbers, t: Thresholds) -> list[str | None]:
    return [_gap_rule(n, t), _small_kernel_rule(n, t), _busy_rule(n, t)]


def _host_rules(n: TraceNumbers, t: Thresholds) -> list[str | None]:
    if n.window_us <= 0 or n.host_op_fraction >= t.host_op_share:
        return []
    return [f"host-overhead: ATen ops cover only {n.host_op_fraction:.0%} of the {_ms(n.window_us)} window "
            f"(< {t.host_op_share:.0%}); the rest is Python and framework overhead between ops: "
            "batch the work into fewer, larger ops."]


def _gap_rule(n: TraceNumbers, t: Thresholds) -> str | None:
    share = n.gap_total_us / n.window_us if n.window_us > 0 else 0.0
    if share < t.gap_share:
        return None
    return (f"host-gaps: the GPU sat idle {_us(n.gap_total_us)} ({share:.0%} of the window) in {n.gap_count} "
            f"gaps > {t.gap_us:g} µs between kernels (largest {_us(n.gap_max_us)}): the host is not keeping "
            "the GPU fed; remove syncs (.item(), .cpu(), print) from the loop, copy with non_blocking=True "
            "from pinned memory, or capture the step in a CUDA graph.")


def _small_kernel_rule(n: TraceNumbers, t: Thresholds) -> str | None:
    if n.kernel_count < t.min_kernels or n.gpu_busy is None or n.gpu_busy >= t.busy_ok:
        return None
    share = n.small_kernels / n.kernel_count
    if share < t.small_kernel_share:
        return None
    return (f"small-kernels: {n.small_kernels} of {n.kernel_count} kernels ({share:.0%}) run under "
            f"{t.small_kernel_us:g} µs (median {_us(n.median_kernel_us)}) while the GPU is busy only "
            f"{n.gpu_busy:.0%}: launch overhead dominates; batch the work into larger kernels or fuse ops "
            "(torch.compile, CUDA graphs).")


def _busy_rule(n: TraceNumbers, t: Thresholds) -> str | None:
    if n.gpu_busy is None:
        return None
    if n.gpu_busy >= t.busy_ok:
        return f"gpu-busy: the GPU is busy {n.gpu_busy:.0%} of the {_ms(n.window_us)} window (>= {t.busy_ok:.0%}): good."
    return (f"gpu-idle: the GPU is busy only {n.gpu_busy:.0%} of the {_ms(n.window_us)} window "
            f"(< {t.busy_ok:.0%}).")


def _alloc_rule(n: TraceNumbers, t: Thresholds) -> list[str | None]:
    share = n.empty_strided_us / n.window_us if n.window_us > 0 else 0.0
    if share < t.empty_strided_share:
        return []
    return [f"alloc: aten::empty_strided takes {_us(n.empty_strided_us)} ({share:.0%} of the window, "
            f"{n.empty_strided_calls} calls): preallocate buffers outside the loop and write into them "
            "(out=, copy_, in-place ops)."]


def _us(value: float) -> str:
    return f"{value / 1e3:.2f} ms" if value >= 1e3 else f"{value:.1f} µs"


def _ms(value: float) -> str:
    return f"{value / 1e3:.3f} ms"
