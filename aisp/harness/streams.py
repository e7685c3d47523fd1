"""Work a call leaves on other streams, read from the GPU's own timestamps.

The sync-tail rule (:func:`aisp.harness.timing.unseen_work`) times on the host how long a device-wide
sync still waits after the call's end event; what ends while the host is returning from that event's
wait is invisible to it (a 30 µs spin left behind a 30 µs call read 9-11 µs on an H200). Here one
untimed call runs under torch's profiler (CUPTI activity records: every kernel, copy and memset on
every stream, with GPU start and end times), followed by a marker kernel on the current stream,
which starts only after everything the call queued there. Work on another stream of the same GPU
that ends after the marker starts is work the call's events cannot see.

As in the timed samples, a spacer kernel on the current stream goes first, so that the call's work
and the marker are all queued before the GPU reaches them: without it the marker starts when the
(profiled, slower) host gets to launch it, after a short hidden tail has ended (on an H200 a 30 µs
spin left behind a 30 µs call read 0 µs that way).
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
SPACER = "aisp_stream_spacer"
"""The profiler range around the spacer kernel's launch."""
SPACER_MS = 2.0
"""The spacer's length: ten times the host's issue of a call under 0.2 ms (the calls this check is
for), profiler overhead included."""
GPU_WORK = ("kernel", "gpu_memcpy", "gpu_memset")
"""Trace categories of work on the GPU."""


def _launched(events: list[dict[str, Any]], name: str) -> tuple[dict[str, Any], float] | None:
    """The GPU work launched inside the last profiler range called ``name``, and the host time of
    that launch; None when the trace holds no such range or work."""
    # the CPU-side range (the profiler also draws it on the GPU's timeline as gpu_user_annotation)
    ranges = [e for e in events if e.get("name") == name and "dur" in e and e.get("cat") != "gpu_user_annotation"]
    if not ranges:
        return None
    start, end = ranges[-1]["ts"], ranges[-1]["ts"] + ranges[-1]["dur"]
    launches = {e["args"]["correlation"]: e["ts"] for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and start <= e.get("ts", -1) <= end
                and "correlation" in e.get("args", {})}
    work = [e for e in events if e.get("cat") in GPU_WORK and "dur" in e
            and e.get("args", {}).get("correlation") in launches]
    if not work:
        return None
    last = max(work, key=lambda e: e["ts"])
    return last, launches[last["args"]["correlation"]]


def leftover_us(events: list[dict[str, Any]]) -> float | None:
    """How long (µs) work on another stream of the marker's GPU ran past the start of the marker
    kernel, 0.0 when none did, or None when the trace holds no marker kernel. ``events``: a Chrome
    trace's ``traceEvents`` as torch's profiler exports them (the marker range, the runtime calls
    inside it, and GPU work linked to them by ``correlation``)."""
    found = _launched(events, MARKER)
    if found is None:
        return None
    marker = found[0]
    stream, device, start = marker["args"].get("stream"), marker["args"].get("device"), marker["ts"]
    others = [e["ts"] + e["dur"] for e in events if e.get("cat") in GPU_WORK and "dur" in e and "args" in e
              and e["args"].get("stream") != stream and e["args"].get("device", device) == device]
    return max(0.0, max(others, default=start) - start)


def beside_spacer_us(events: list[dict[str, Any]]) -> float:
    """How long (µs) work on another stream of the spacer's GPU ran while the spacer kernel held the
    current stream: the call's work on a stream that never waited for the current one starts at once,
    beside the spacer, before the timed window's start event (in the timed samples the spacer runs
    there too), so the events never see it. Only the call's work is in the trace besides the spacer
    and the marker; 0.0 without a spacer kernel."""
    found = _launched(events, SPACER)
    if found is None:
        return 0.0
    spacer = found[0]
    stream, device = spacer["args"].get("stream"), spacer["args"].get("device")
    start, end = spacer["ts"], spacer["ts"] + spacer["dur"]
    spans = sorted((max(e["ts"], start), min(e["ts"] + e["dur"], end)) for e in events
                   if e.get("cat") in GPU_WORK and "dur" in e and "args" in e
                   and e["args"].get("stream") != stream and e["args"].get("device", device) == device
                   and e["ts"] < end and e["ts"] + e["dur"] > start)
    covered, reach = 0.0, start
    for lo, hi in spans:  # the union of the overlaps: concurrent side streams count once
        lo = max(lo, reach)
        if hi > lo:
            covered, reach = covered + hi - lo, hi
    return covered


def spacer_covered(events: list[dict[str, Any]]) -> bool | None:
    """Whether the host launched the marker before the spacer kernel ended on the GPU (so the call's
    work ran as queued, not as the host got to it); None without a spacer or marker in the trace."""
    spacer, marker = _launched(events, SPACER), _launched(events, MARKER)
    if spacer is None or marker is None:
        return None
    return marker[1] < spacer[0]["ts"] + spacer[0]["dur"]


def traced_leftover(fn: Callable[[], Any], device: torch.device) -> tuple[float | None, str | None]:
    """The spacer, one call of ``fn`` and the marker kernel on the current stream, under torch's
    profiler (CUDA activity): (µs of work on other streams past the marker, plus beside the spacer
    (:func:`beside_spacer_us`), None) or (None, why it could not be read)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    from aisp.harness.timing import cycles_per_ms

    cycles = int(SPACER_MS * cycles_per_ms(device))
    torch.cuda.synchronize(device)
    fd, path = tempfile.mkstemp(suffix=".json", prefix="aisp_streams_")
    os.close(fd)
    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            with record_function(SPACER):
                torch.cuda._sleep(cycles)
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
    if found is None:
        return None, "the marker kernel is not in the profiler's trace"
    if spacer_covered(events) is False:
        return None, f"the host launched the marker after the {SPACER_MS:g} ms spacer had ended"
    return found + beside_spacer_us(events), None
