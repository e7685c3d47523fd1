"""Timing calls: device-wide syncs, CUDA events plus a host clock, GC off, optional L2 flush; a spacer
kernel that keeps the host's launch path out of the events; the host's issue time of each call; and
the tail a device-wide sync still waits for after the end event (work the events did not see)."""

from __future__ import annotations

import functools
import gc
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

UNSEEN_REL, UNSEEN_ABS_MS = 0.10, 0.01
"""After a call's end event has completed, a device-wide sync should return at once. Its wait, less
the wait of the same sync repeated at once (which cancels what a sync costs on a loaded host at that
moment), is work the call left on another stream. A median above max(10% of the median event time,
10 µs) is an error: the speedup would be overstated by more than 10%, or (for calls under 100 µs) by
more than the floor, which is left to host jitter between two syncs. Unpaired, with a 20 µs floor,
four pairs at once on a 4 x H200 host gave false errors (syncs of 20-60 µs with nothing left) and a
30 µs spin left behind a 30 µs call went unseen (2026-11-28)."""
HOST_BOUND_RATIO = 1.1
"""A variant is host-bound when its median event time is at most 1.1 x its median host issue time.
With the spacer in front, the events time the device work alone; when that is not clearly above the
time the host takes to issue it, a caller without a queue ahead (no spacer) waits on the host, and
the event time understates what it sees. The 10% margin stands for the call-to-call spread of a
host's issue time, within which the two figures cannot be told apart (a margin chosen, not yet
measured on a GPU host)."""
SPACER_FACTOR, SPACER_MIN_MS, SPACER_MAX_MS = 2.0, 0.05, 20.0
WAITED_FRACTION = 0.9
"""A call whose issue time reaches the spacer plus this share of its events returned only after its
device work: it waited (a host sync inside run()), it did not issue for that long."""
"""The spacer spins 2 x the variant's median issue time (the launch path plus as much again for host
jitter), at least 50 µs (a Triton launch takes 20-40 µs), at most 20 ms: a call whose issue time
is longer than 10 ms is host-bound anyway, and the spin costs GPU time every sample."""
SAMPLE_KEYS = ("samples_ms", "host_samples_ms", "issue_samples_ms", "tail_samples_ms", "idle_probe_ms",
               "idle_tail_ms", "empty_tail_ms")
"""The timing lists of a variant's raw record: per timed sample, and (CUDA) per untimed probe call
timed from idle before them, and the sync tails of empty calls in the same window (the tails are
empty on a CPU)."""
EMPTY_PROBES = 5
"""Empty calls (nothing issued between the events) timed per variant after its idle probes: the
median of their sync tails is what a device-wide sync costs in this process when nothing is left,
subtracted from the variant's own tails before the unseen-work rule. On a 4 x H200 host running
four pairs at once (2026-11-28) every variant of some pairs, baselines included, waited 20-60 us
in that sync with no side stream in sight (ch09:split_k, ch11:concurrent_kernels, ch13:
arithmetic_intensity, ch16:fp8_kv_cache, ch18:paged_attention_decode), where a quiet H200 waits
8-15 us: a fixed 20 us floor made them false errors."""
IDLE_PROBES = 3
"""Untimed calls from idle before the samples: the first warms up after gc.collect(); their sync tails
catch work on a stream that never waited for the current one and would finish under the spacer."""


@dataclass
class Timed:
    """One timed window (``calls`` back-to-back calls): the last output; per call the host wall time,
    the host's issue time (inside ``fn()`` itself) and (on CUDA) the summed event time, in
    milliseconds; and (on CUDA) per call the wait of a device-wide sync after the last end event
    completed, less the wait of the same sync repeated at once."""

    output: Any
    host_ms: float
    device_ms: float | None
    issue_ms: float = 0.0
    tail_ms: float | None = None
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


@functools.cache
def cycles_per_ms(device: torch.device) -> float:
    """SM clock cycles per millisecond, measured once per process with ``torch.cuda._sleep`` (a
    one-thread spin kernel): the fastest of three spins, so a lower clock later only lengthens a spacer."""
    best = 0.0
    for _ in range(3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        start.record()
        torch.cuda._sleep(1_000_000)
        end.record()
        end.synchronize()
        best = max(best, 1e6 / start.elapsed_time(end))
    return best


def spacer_ms(issue_ms: Sequence[float]) -> float:
    """How long the spacer spins for a variant whose calls took ``issue_ms`` to issue (SPACER_*)."""
    median = float(np.median(issue_ms)) if len(issue_ms) else 0.0
    return min(max(SPACER_FACTOR * median, SPACER_MIN_MS), SPACER_MAX_MS)


def grown_spacer(spacer: float, issue_ms: float, device_ms: float | None, calls: int) -> float:
    """The spacer for the next sample of a variant whose last sample took ``issue_ms`` (per call) to
    issue and ``device_ms`` of events: SPACER_FACTOR x that issue time (at most SPACER_MAX_MS) when
    its one call was issued past the spacer's end without waiting for its device work, else unchanged.
    A host slower than in warmup (a busy host, another process's burst) starves the GPU inside the
    window and the events time the host: on 4 x H200, ch19:fp8_delayed_scaling's 0.147 ms spacer was
    outrun in 14 of 20 samples (issue 0.15-0.27 ms). A call that waits for its device work (a host
    sync inside run(): issue >= spacer + 0.9 x events, as :func:`host_bound` reads it) is not starved;
    no spacer would cover it."""
    if not outran(spacer, issue_ms, device_ms, calls):
        return spacer
    return max(spacer, min(SPACER_FACTOR * issue_ms, SPACER_MAX_MS))


def outran(spacer: float, issue_ms: float, device_ms: float | None, calls: int) -> bool:
    """Whether a sample's one call was issued past the spacer's end without waiting for its device
    work (see :func:`grown_spacer`): the GPU may have idled inside its window."""
    if spacer <= 0 or calls != 1 or issue_ms <= spacer or device_ms is None:
        return False
    return issue_ms < spacer + WAITED_FRACTION * device_ms


def syncs_inside(fn: Callable[[], Any]) -> bool:
    """Whether one call of ``fn`` makes torch wait for the GPU (``.item()``, ``.tolist()``, a blocking
    copy): torch's sync debug mode warns on each, and the warnings are read here. Such a call's issue
    time includes waiting for its own device work, so no spacer covers it (:func:`grown_spacer`)."""
    before = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode(before)
    return any("synchroniz" in str(w.message) for w in seen)


class CudaSide:
    """The CUDA calls a timed window makes, in one place so a CPU test can stand in for the GPU."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def synchronize(self) -> None:
        torch.cuda.synchronize(self.device)

    def event(self) -> Any:
        return torch.cuda.Event(enable_timing=True)

    def spin(self, ms: float) -> None:
        """Queue a spin of ``ms`` milliseconds on the current stream (nothing for 0)."""
        if ms > 0:
            torch.cuda._sleep(int(ms * cycles_per_ms(self.device)))


def _time_host(fn: Callable[[], Any], calls: int) -> Timed:
    t0 = time.perf_counter()
    for _ in range(calls):
        out = fn()
    t1 = time.perf_counter()
    return Timed(out, (t1 - t0) * 1e3 / calls, None, (t1 - t0) * 1e3 / calls, None, t0, t1)


def time_call(fn: Callable[[], Any], device: torch.device, calls: int = 1, spacer: float = 0.0,
              before: Callable[[], Any] | None = None, cuda: CudaSide | None = None) -> Timed:
    """Time ``calls`` back-to-back calls of ``fn()`` (no sync between them) after a device-wide sync;
    on CUDA each call between two events recorded on the current stream.

    ``spacer`` > 0 (the device window): ``before()`` (the L2 flush) and a spin of ``spacer`` ms are
    queued on the stream right before the first start event, with no sync in between, so the GPU is
    busy while the host issues the call and the events time device work, as ``triton.testing.do_bench``
    does. ``spacer`` = 0 (latency from idle): ``before()``, a sync, then the start event on an idle GPU,
    so the events also hold the host's path to the first kernel. After the last end event has
    completed, a device-wide sync is timed: the tail of work left on other streams. A second sync
    right after it (nothing left) is subtracted, which cancels what a sync costs on a loaded host at
    that moment, and the rest is divided by ``calls``: back to back, work a call leaves on another
    stream runs beside the next call; only what piles up is unseen, per call."""
    if device.type != "cuda" and cuda is None:
        if before is not None:
            before()
        return _time_host(fn, calls)
    cuda = cuda or CudaSide(device)
    events = [(cuda.event(), cuda.event()) for _ in range(calls)]
    cuda.synchronize()
    if before is not None:
        before()
    if spacer > 0:
        cuda.spin(spacer)
    else:
        cuda.synchronize()
    t0, issue = time.perf_counter(), 0.0
    for start, end in events:
        start.record()
        t = time.perf_counter()
        out = fn()
        issue += time.perf_counter() - t
        end.record()
    events[-1][1].synchronize()
    tail = time.perf_counter()
    cuda.synchronize()
    t1 = time.perf_counter()
    cuda.synchronize()  # the same sync again, nothing left: what it costs on this host at this moment
    resync = time.perf_counter() - t1
    device_ms = sum(s.elapsed_time(e) for s, e in events) / calls
    tail_ms = max(0.0, (t1 - tail) - resync) * 1e3 / calls
    return Timed(out, (t1 - t0) * 1e3 / calls, device_ms, issue * 1e3 / calls, tail_ms, t0, t1)


def graph_replay(fn: Callable[[], Any], device: torch.device) -> tuple[Callable[[], Any] | None, str | None]:
    """``fn`` captured into a CUDA graph (after one call on a side stream, as torch asks) and a function
    that replays it and returns the captured output; or None and why it could not be captured."""
    try:
        side, current = torch.cuda.Stream(device), torch.cuda.current_stream(device)
        side.wait_stream(current)
        with torch.cuda.stream(side):
            fn()
        current.wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = fn()
    except Exception as exc:  # a host sync, a CPU op or another stream's work inside run()
        return None, f"{type(exc).__name__}: {exc}".splitlines()[0]

    def replay() -> Any:
        graph.replay()
        return out
    return replay, None


def empty_tails(device: torch.device, spacer: float, clock: Callable[..., Timed] | None = None) -> list[float]:
    """The sync tails of EMPTY_PROBES empty calls, one a window (``clock``: :func:`time_call` or a stand-in
    taking its first four arguments), what :func:`unseen_work` subtracts as ``empty_ms``; none on a CPU."""
    timed = ((clock or time_call)(lambda: None, device, 1, spacer) for _ in range(EMPTY_PROBES))
    return [t.tail_ms for t in timed if t.tail_ms is not None]


def unseen_work(tail_ms: Sequence[float], device_ms: Sequence[float], calls: str = "timed calls",
                empty_ms: Sequence[float] = ()) -> str | None:
    """Why the events under-time a variant (a device-wide sync after its end events still waited
    longer than UNSEEN_REL/UNSEEN_ABS_MS allow, beyond what the same sync takes after an empty call in
    this process: the median of ``empty_ms``), or None. ``calls`` names the calls, for the reason."""
    if not len(tail_ms) or not len(device_ms):
        return None
    overhead = float(np.median(empty_ms)) if len(empty_ms) else 0.0
    tail, events = float(np.median(tail_ms)) - overhead, float(np.median(device_ms))
    if tail <= max(UNSEEN_REL * events, UNSEEN_ABS_MS):
        return None
    after = f" more than after an empty call ({overhead:.3f} ms)" if len(empty_ms) else ""
    return (f"work outside the timed stream: after the end event, a device-wide sync waited {tail:.3f} ms{after} "
            f"(median of {calls}) beyond CUDA events of {events:.3f} ms; join side streams to the current "
            "stream (wait_stream) before run() returns")


def tail_overruled(tail_ms: Sequence[float], device_ms: Sequence[float], empty_ms: Sequence[float],
                   idle_tail_ms: Sequence[float], idle_probe_ms: Sequence[float],
                   leftover_us: float | None) -> str | None:
    """Why the timed samples' sync tail is not read as unseen work (a note), or None where it stands.

    It is overruled only where the GPU's own timestamps were read (``leftover_us``: profiled calls, not
    None) and show no work on other streams outside the current stream's (:func:`left_on_streams`:
    past its end, or beside the spacer, where work on a stream that never waited for the current one
    runs), and the tail of the calls from idle shows none either."""
    sampled = unseen_work(tail_ms, device_ms, empty_ms=empty_ms)
    if sampled is None or leftover_us is None:
        return None
    if unseen_work(idle_tail_ms, idle_probe_ms, "untimed calls from idle", empty_ms):
        return None
    if left_on_streams(leftover_us, device_ms):  # against the timed calls' events: the stricter bound
        return None
    tail = float(np.median(tail_ms)) - (float(np.median(empty_ms)) if len(empty_ms) else 0.0)
    return (f"its sync tail read {tail:.3f} ms past its events (median of timed calls), but the GPU's "
            f"timestamps of profiled calls show {leftover_us:.1f} µs of work on other streams and the calls "
            "from idle none: host wake-up jitter, not unseen work; timed by its events")


def idle_tail_overruled(idle_tail_ms: Sequence[float], idle_probe_ms: Sequence[float], empty_ms: Sequence[float],
                        tail_ms: Sequence[float], device_ms: Sequence[float], leftover_us: float | None) -> str | None:
    """Why the calls from idle's sync tail is not read as unseen work (a note), or None where it stands:
    the mirror of :func:`tail_overruled`. It is overruled only where the GPU's own timestamps were read
    and show no work on other streams outside the current stream's, and the timed samples' tail shows
    none either (``ch19:w4a16_gemm``'s one-stream kernel read 0.026 ms past an empty call from idle,
    over a 0.021 ms allowance, in one of two H200 runs, 2026-11-29)."""
    if unseen_work(idle_tail_ms, idle_probe_ms, "untimed calls from idle", empty_ms) is None or leftover_us is None:
        return None
    if unseen_work(tail_ms, device_ms, empty_ms=empty_ms) or left_on_streams(leftover_us, idle_probe_ms):
        return None
    tail = float(np.median(idle_tail_ms)) - (float(np.median(empty_ms)) if len(empty_ms) else 0.0)
    return (f"its calls from idle read a sync tail of {tail:.3f} ms past their events, but the GPU's timestamps "
            f"of profiled calls show {leftover_us:.1f} µs of work on other streams and the timed calls none: "
            "host wake-up jitter, not unseen work")


STREAM_FLOOR_US = 5.0
"""Work on another stream that ends up to 5 µs after the current stream's last kernel (GPU
timestamps, :mod:`aisp.harness.streams`) is left to timestamp rounding and launch order."""


def left_on_streams(leftover_us: float | None, device_ms: Sequence[float]) -> str | None:
    """Why a variant's events miss work (in a profiled call, work on another stream ran outside the
    current stream's, past its last work or beside the spacer, by more than max(UNSEEN_REL of the
    median event time, STREAM_FLOOR_US)), or None."""
    if leftover_us is None or not len(device_ms):
        return None
    events_us = float(np.median(device_ms)) * 1e3
    if leftover_us <= max(UNSEEN_REL * events_us, STREAM_FLOOR_US):
        return None
    return (f"work outside the timed stream: in a profiled call, work on another stream ran {leftover_us:.1f} µs "
            f"outside the current stream's work (past its end, or beside the spacer before its start: GPU "
            f"timestamps) beside CUDA events of {events_us:.1f} µs; "
            "join side streams to the current stream (wait_stream) before run() returns")


def host_bound(issue_ms: Sequence[float], device_ms: Sequence[float], spacer_ms: float = 0.0) -> dict[str, float] | None:
    """The figures of a host-bound variant (median events within HOST_BOUND_RATIO of the median issue
    time), or None when its device work clearly exceeds its issue time, or when its call returned
    only after the spacer and its own device work (issue >= spacer + 0.9 x events: a host sync inside
    ``run()``, a loss copied to the host): that host time is waiting for the device, not issuing."""
    if not len(issue_ms) or not len(device_ms):
        return None
    issue, events = float(np.median(issue_ms)), float(np.median(device_ms))
    if events > HOST_BOUND_RATIO * issue or (spacer_ms > 0 and issue >= spacer_ms + WAITED_FRACTION * events):
        return None
    return {"issue_ms": issue, "events_ms": events, "events_over_issue": events / issue if issue > 0 else 0.0}


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
    """Evicts the GPU's L2 by writing a buffer twice its size (queued before the start event, outside
    the events: with the device window it sits in the stream ahead of the spacer)."""
    if device.type != "cuda":
        return lambda: None
    l2 = torch.cuda.get_device_properties(device).L2_cache_size or (64 << 20)
    buffer = torch.empty(2 * l2, dtype=torch.uint8, device=device)
    return lambda: buffer.random_(0, 255)
