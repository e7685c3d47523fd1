"""Timing one call: device-wide sync, CUDA events plus a host clock, GC off, optional L2 flush."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class Timed:
    """One timed call: its output, host wall time and (on CUDA) event time, in milliseconds."""

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


def time_call(fn: Callable[[], Any], device: torch.device) -> Timed:
    """Time ``fn()`` between two device-wide syncs, with events on CUDA."""
    synchronize(device)
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        start.record()
        out = fn()
        end.record()
        torch.cuda.synchronize(device)
        t1 = time.perf_counter()
        return Timed(out, (t1 - t0) * 1e3, start.elapsed_time(end), t0, t1)
    t0 = time.perf_counter()
    out = fn()
    t1 = time.perf_counter()
    return Timed(out, (t1 - t0) * 1e3, None, t0, t1)


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


class L2Flusher:
    """Evicts the GPU's L2 by writing a buffer twice its size; called outside the timed window."""

    def __init__(self, device: torch.device) -> None:
        self.buffer: torch.Tensor | None = None
        if device.type == "cuda":
            l2 = torch.cuda.get_device_properties(device).L2_cache_size or (64 << 20)
            self.buffer = torch.empty(2 * l2, dtype=torch.uint8, device=device)

    def __call__(self) -> None:
        if self.buffer is not None:
            self.buffer.random_(0, 255)
