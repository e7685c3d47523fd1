"""Shared by the chapters' GPU tests: a function's mean time a call, read by CUDA events (printed
for the lead beside a correctness check; never asserted on a host without a GPU)."""

from __future__ import annotations

from collections.abc import Callable

import torch


def timed_ms(fn: Callable[[], object], reps: int = 10) -> float:
    """Milliseconds a call of ``fn``: one warm call, then ``reps`` calls between two events."""
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps
