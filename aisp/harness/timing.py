"""Timing calls: device-wide syncs, CUDA events plus a host clock, GC off, optional L2 flush; and the
check that the events saw all the work the host clock saw."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

UNSEEN_REL, UNSEEN_ABS_MS = 0.5, 0.05
"""A variant's median host time may exceed its median event time by max(50% of it, 0.05 ms): the host
window also holds two event records and the sync's wake-up (median 13-19 us, p90 21-29 us on an
H100); beyond that, the call left work that the events on the current stream missed."""


@dataclass
class Timed:
    """One timed window (``calls`` back-to-back calls): the last output, and per call the host wall
    time and (on CUDA) the summed event time, in milliseconds."""

    output: Any
    host_ms: float
    device_ms: float | None
    start_s: float = 0.0
    """perf_counter() at the start of the window (for matching telemetry)."""
    end_s: float = 0.0

    @property
    def ms(self) -> float:
        """The headline time: CUDA event time on a GPU, host time on a CPU."""
        return self.device_ms if self.device_ms is not None else self.host_ms


def synchronize(device: torch.device) -> None:
    """Wait for all work on the device (every stream), a no-op on CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_call(fn: Callable[[], Any], device: torch.device, calls: int = 1) -> Timed:
    """Time ``calls`` back-to-back calls of ``fn()`` (no sync between them) between two device-wide
    syncs; on CUDA each call also between two events recorded on the current stream."""
    if device.type != "cuda":
        t0 = time.perf_counter()
        for _ in range(calls):
            out = fn()
        t1 = time.perf_counter()
        return Timed(out, (t1 - t0) * 1e3 / calls, None, t0, t1)
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(calls)]
    torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    for start, end in events:
        start.record()
        out = fn()
        end.record()
    torch.cuda.synchronize(device)
    t1 = time.perf_counter()
    return Timed(out, (t1 - t0) * 1e3 / calls, sum(s.elapsed_time(e) for s, e in events) / calls, t0, t1)


def unseen_work(host_ms: Sequence[float], device_ms: Sequence[float]) -> str | None:
    """Why the events under-time a variant (host clock far above them), or None."""
    if not host_ms or not device_ms:
        return None
    host, events = float(np.median(host_ms)), float(np.median(device_ms))
    if host - events <= max(UNSEEN_REL * events, UNSEEN_ABS_MS):
        return None
    return (f"work outside the timed stream: host clock {host:.3f} ms vs CUDA events {events:.3f} ms; join side "
            "streams to the current stream (wait_stream) before run() returns")


@contextmanager
def gc_disabled() -> Iterator[None]:
    """Collect once, then keep the garbage collector off inside the block."""
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def l2_flusher(device: torch.device) -> Callable[[], Any]:
    """Evicts the GPU's L2 by writing a buffer twice its size (called outside the timed window)."""
    if device.type != "cuda":
        return lambda: None
    l2 = torch.cuda.get_device_properties(device).L2_cache_size or (64 << 20)
    buffer = torch.empty(2 * l2, dtype=torch.uint8, device=device)
    return lambda: buffer.random_(0, 255)
