"""Work a call leaves on other streams, read from the GPU's own timestamps.

The sync-tail rule (:func:`aisp.harness.timing.unseen_work`) times on the host how long a device-wide
sync still waits after the call's end event; what ends while the host is returning from that event's
wait is invisible to it (a 30 µs spin left behind a 30 µs call read 9-11 µs on an H200). Here one
untimed call runs under torch's profiler (CUPTI activity records: every kernel, copy and memset on
every stream, with GPU start and end times), followed by a marker kernel on the current stream,
which starts only after everything the call queued there. Work on another stream of the same GPU
that ends after the marker is work the call's events cannot see.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from typing import Any

import torch

MARKER = "aisp_stream_marker"
"""The profiler range around the marker kernel's launch (how its kernel is found in the trace)."""
GPU_WORK = ("kernel", "gpu_memcpy", "gpu_memset")
"""Trace categories of work on the GPU."""


def leftover_us(events: list[dict[str, Any]]) -> float | None:
    """How long (µs) work on another stream of the marker's GPU ran past the marker kernel's end, 0.0
    when none did, or None when the trace holds no marker kernel. ``events``: a Chrome trace's
    ``traceEvents`` as torch's profiler exports them (the marker range, the runtime calls inside it,
    and GPU work linked to them by ``correlation``)."""
    # the CPU-side range (the profiler also draws it on the GPU's timeline as gpu_user_annotation)
    ranges = [e for e in events if e.get("name") == MARKER and "dur" in e and e.get("cat") != "gpu_user_annotation"]
    if not ranges:
        return None
    start, end = ranges[-1]["ts"], ranges[-1]["ts"] + ranges[-1]["dur"]
    launched = {e["args"].get("correlation") for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and start <= e.get("ts", -1) <= end
                and "correlation" in e.get("args", {})}
    gpu = [e for e in events if e.get("cat") in GPU_WORK and "dur" in e and "args" in e]
    markers = [e for e in gpu if e["args"].get("correlation") in launched]
    if not markers:
        return None
    marker = markers[-1]
    stream, device, done = marker["args"].get("stream"), marker["args"].get("device"), marker["ts"] + marker["dur"]
    others = [e["ts"] + e["dur"] for e in gpu
              if e["args"].get("stream") != stream and e["args"].get("device", device) == device]
    return max(0.0, max(others, default=done) - done)


def traced_leftover(fn: Callable[[], Any], device: torch.device) -> tuple[float | None, str | None]:
    """One call of ``fn`` under torch's profiler (CUDA activity), then the marker kernel on the current
    stream: (µs of work on other streams past the marker, None) or (None, why it could not be read)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    torch.cuda.synchronize(device)
    fd, path = tempfile.mkstemp(suffix=".json", prefix="aisp_streams_")
    os.close(fd)
    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            fn()
            with record_function(MARKER):
                torch.cuda._sleep(1)
            torch.cuda.synchronize(device)
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f).get("traceEvents", [])
    except Exception as exc:  # no CUPTI, another profiler attached (Nsight), an unreadable trace
        return None, f"{type(exc).__name__}: {exc}".splitlines()[0]
    finally:
        os.unlink(path)
    found = leftover_us(events)
    return (found, None) if found is not None else (None, "the marker kernel is not in the profiler's trace")
