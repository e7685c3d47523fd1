"""Running one pair inside its worker process: verify, then time interleaved, then measure memory."""

from __future__ import annotations

import functools
import gc
import os
import resource
import secrets
import statistics
import time
import traceback
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from aisp.harness import host
from aisp.harness.benchmark import Benchmark, Unavailable, Workload, unmet_requirements
from aisp.harness.loader import load_benchmark
from aisp.harness.names import PEAK_METHOD
from aisp.harness.options import RunOptions
from aisp.harness.phases import phase
from aisp.harness.settings import ProcessSettings
from aisp.harness.streams import traced_leftover
from aisp.harness.telemetry import Telemetry, nvml_memory_reader, nvml_reader
from aisp.harness.timing import (
    IDLE_PROBES,
    SAMPLE_KEYS,
    empty_tails,
    gc_disabled,
    graph_replay,
    grown_spacer,
    idle_tail_overruled,
    l2_flusher,
    outran,
    spacer_ms,
    synchronize,
    syncs_inside,
    tail_overruled,
    time_call,
    unseen_work,
)
from aisp.harness.verify import (
    CallGuard,
    CheckPlan,
    Evidence,
    VerificationError,
    compare,
    fingerprint,
    held_bytes,
    high_precision,
    input_signature,
    match_inputs,
    tensor_attributes,
)

SUSTAINED_BATCH_S = 0.02
"""--timing sustained: one sample is as many back-to-back calls as take about this long."""
CHECK_HINT = ("before it, `scratch` and tensors created after setup() were set to NaN and the declared `inputs` "
              "refilled with new values: a run() that skips its work or returns an answer computed ahead fails")
UNDRIVEN = "its output did not change when its declared `inputs` got new values: declare what run() reads"
UNCHECKED = "no per-call inputs declared: answers computed ahead are not checked"


@dataclass
class Variant:
    """One file of the pair and what happened to it in this process."""

    path: Path
    bench: Benchmark | None = None
    samples_ms: list[float] = field(default_factory=list)
    host_samples_ms: list[float] = field(default_factory=list)
    issue_samples_ms: list[float] = field(default_factory=list)
    """Per sample, the host's time inside run() itself (per call)."""
    tail_samples_ms: list[float] = field(default_factory=list)
    """Per sample (CUDA), the wait of a device-wide sync after the last end event had completed."""
    idle_probe_ms: list[float] = field(default_factory=list)
    """Event times of the untimed probe calls timed from idle (CUDA)."""
    idle_tail_ms: list[float] = field(default_factory=list)
    """Their sync tails: work on a stream that never waited for the current one runs beside the
    spacer in the timed samples, unseen, but past the end event here."""
    empty_tail_ms: list[float] = field(default_factory=list)
    """Sync tails of empty calls in this variant's window (EMPTY_PROBES), the tail rule's zero."""
    stream_leftover_us: float | None = None
    """In one profiled untimed call (CUDA), how long work on other streams ran outside the current
    stream's (past its last work, or beside the spacer before it), from the GPU's timestamps
    (:mod:`aisp.harness.streams`); None: not read.
    When the timed samples' sync tail says work was left behind, the longest of TRACE_CONFIRMS such
    calls (:func:`confirm_tails`)."""
    warm_issue_ms: list[float] = field(default_factory=list)
    """The issue time of each warmup call, which sizes the spacer."""
    spacer_ms: float = 0.0
    """The spin queued before each sample's start event (0: timed from idle, or a CPU); the last
    sample's, after any growth (:func:`aisp.harness.timing.grown_spacer`)."""
    syncs_inside: bool = False
    """An untimed call made torch wait for the GPU (``.item()``, ``.tolist()``): its issue time holds
    that wait, so its spacer is not grown (CUDA, device window)."""
    starved_samples: int = 0
    """Samples whose one call the host issued past the spacer's end (the GPU may have idled inside
    the window); each grows the spacer for the samples after it."""
    retaken_samples: int = 0
    """Starved samples taken again at once, in the same slot of the rotation, with the grown spacer
    (their events held the host's issue: on 2 x H200, 2026-11-29, one such sample of ch19:w4a16_gemm's
    ``_tiled`` read 0.175 ms against 0.089-0.093 for the other 19); one taken at the spacer's cap stays."""
    solo_samples_ms: list[float] = field(default_factory=list)
    """The baseline's samples alone, before any other variant's setup (:func:`time_alone`)."""
    solo_clock_mhz: list[int] = field(default_factory=list)
    """The SM clock NVML read right after each sample alone (empty: not read)."""
    timed_clock_mhz: float | None = None
    """The median SM clock of the telemetry readings over its timed samples (None: not read)."""
    checked_call: int | None = None
    """The timed call whose inputs were refilled and output checked (0-based, among all timed calls):
    timed like the others but left out of the samples (refilling and cloning came right before it)."""
    verdict: str = "pending"
    reason: str | None = None
    evidence: Evidence = field(default_factory=Evidence)
    memory: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    known_after_setup: set[str] = field(default_factory=set)
    held_after_setup: int = 0
    """Device bytes the benchmark's attributes held right after setup (:func:`held_bytes`)."""
    windows: list[tuple[float, float]] = field(default_factory=list)
    throttled: dict[int, list[str]] = field(default_factory=dict)
    """Timed sample index → throttle reasons NVML reported during it."""
    settings: ProcessSettings | None = None
    """The watch on process-wide settings this variant shares with the others."""

    @property
    def name(self) -> str:
        return self.path.stem

    def fail(self, verdict: str, reason: str) -> None:
        """Record why the variant failed; its samples, if any, no longer count."""
        self.verdict, self.reason = verdict, reason
        for key in SAMPLE_KEYS:
            getattr(self, key).clear()

    def enter(self) -> None:
        """About to run this variant's code: restore the process-wide settings others changed."""
        if self.settings is not None:
            self.settings.enter(self.evidence.notes)


def watch_settings(variants: list[Variant]) -> ProcessSettings:
    """One watch on process-wide settings for the variants of a pair (before any of its code runs)."""
    settings = ProcessSettings(variants[0].path.parent, variants[0].evidence.notes)
    for var in variants:
        var.settings = settings
    return settings


def pick_device(choice: str) -> torch.device:
    if choice == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda was asked for, but no CUDA GPU is visible")
    if choice == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda")


def _settle(device: torch.device) -> None:
    """Free the garbage of earlier passes now, not inside a measured window (negative memory)."""
    gc.collect()
    synchronize(device)
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _memory_now(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.memory_allocated(device)
    import psutil
    return psutil.Process().memory_info().rss


def set_up(var: Variant, device: torch.device, seed: int) -> Benchmark:
    """Load, place and set up one variant; records the bytes its setup kept and the tensors it
    holds right after setup (what the checked call's poisoning treats as known)."""
    var.enter()
    bench = load_benchmark(var.path)
    bench.device, bench.seed = device, seed
    _snapshot_modules(var)
    _settle(device)
    before, reserved, outside = _memory_now(device), _reserved_now(device), _outside_now(device)
    with phase("setup"):
        bench.setup()
    declared_names(bench)
    _settle(device)
    _snapshot_modules(var)
    var.bench = bench
    var.memory["setup_bytes"] = _memory_now(device) - before
    if reserved is not None:
        var.memory["setup_reserved_bytes"] = _reserved_now(device) - reserved
    if outside is not None:
        var.memory["setup_outside_bytes"] = _outside_now(device) - outside
    var.known_after_setup = set(tensor_attributes(bench))
    var.held_after_setup = held_bytes(bench, device.type)
    return bench


def declared_names(bench: Benchmark) -> None:
    """Raise where setup() assigned an attribute over one of the names the harness reads its tensors'
    roles from (``inputs``, ``scratch``, ``state``: tuples of attribute names): a tensor there made the
    checked call iterate its elements (a 256 MiB ``self.scratch`` held the worker past its 120 s limit)."""
    for role in ("inputs", "scratch", "state"):
        names = getattr(bench, role)
        if not isinstance(names, (tuple, list)) or not all(isinstance(n, str) for n in names):
            raise TypeError(f"setup() set self.{role} to a {type(names).__name__}; '{role}' names the benchmark's "
                            f"{role} (a tuple of attribute names): give that attribute another name")


def _snapshot_modules(var: Variant) -> None:
    if var.settings is not None:
        var.settings.snapshot_modules()


def _reserved_now(device: torch.device) -> int | None:
    return torch.cuda.memory_reserved(device) if device.type == "cuda" else None


def _outside_now(device: torch.device) -> int | None:
    """Bytes in use on the device that torch's caching allocator did not reserve (CUDA's free-memory
    query, device-wide): symmetric memory, NCCL buffers, a library's own cudaMalloc, the CUDA context,
    another process on the GPU. Its change over a window is what the window allocated outside torch."""
    if device.type != "cuda":
        return None
    free, total = torch.cuda.mem_get_info(device)
    return total - free - torch.cuda.memory_reserved(device)


def guarded_run(bench: Benchmark) -> list[tuple[str, torch.Tensor]]:
    """One verified call: inputs unchanged, output fresh and not aliasing an input."""
    guard = CallGuard(bench)
    output = bench.run()
    synchronize(bench.device)
    return guard.check(output)


@phase("verify")
def verify_seed(variants: list[Variant], workload: Workload, device: torch.device, seed: int,
                keep: bool, reproducible: bool = False,
                alone: Callable[[Variant], None] | None = None) -> tuple[Any, ...] | None:
    """Build every variant at ``seed``, run each once, compare each optimized with the baseline. With
    ``keep`` the set-up benchmarks stay on the variants for timing; otherwise torn down. ``alone``
    times the baseline after its verified call, before any other variant is set up. Returns the
    fingerprint of the baseline's output, None when it declares no per-call inputs."""
    base, label = variants[0], f"seed {seed}" + ("" if keep else " (drawn at random)")
    ref = guarded_run(set_up(base, device, seed))
    high = high_precision(base.bench)  # the baseline's optional fp32/fp64 reference, same inputs
    signature, printed = input_signature(base.bench), tuple(fingerprint(t) for _, t in ref)
    if alone is not None:
        alone(base)
    if not keep:
        teardown([base])
    for var in variants[1:]:
        if var.verdict != "pending":
            continue
        var.enter()
        skip = unmet_requirements(load_benchmark(var.path).workload.requires, device)
        if skip:
            var.fail("skipped", skip)
            continue
        try:
            match_inputs(signature, set_up(var, device, seed))
            var.evidence.merge(compare(ref, guarded_run(var.bench), workload, high))
            var.evidence.checks.append(f"{label}: matches baseline")
            var.evidence.notes += [UNCHECKED] if keep and not signature else []
        except VerificationError as exc:
            var.fail("verify-failed", f"{label}: {exc}")
        except Exception as exc:  # one broken variant must not stop the others
            traceback.print_exc()
            var.fail(*describe_error(exc, reproducible))
        if not keep or var.verdict != "pending":
            teardown([var])
    return printed if signature else None


def _rotation(live: list[Variant], i: int) -> list[Variant]:
    return [live[(i + k) % len(live)] for k in range(len(live))]


def _alone(value: Any = None) -> Any:
    return value


@phase("warmup")
def warm_up(live: list[Variant], options: RunOptions, device: torch.device, offset: int,
            align: Callable[[Any], Any] = _alone) -> None:
    """Rotations until both ``options.warmup`` of them and ``options.warmup_s`` seconds have passed
    (rank 0's clock decides for every rank)."""
    started, i = time.perf_counter(), 0
    while align(i < options.warmup or time.perf_counter() - started < options.warmup_s):
        for var in _rotation(live, offset + i):
            var.enter()
            t = time.perf_counter()
            var.bench.run()
            var.warm_issue_ms.append((time.perf_counter() - t) * 1e3)
        synchronize(device)
        i += 1


STREAM_PROBE_MAX_MS = 0.2
"""Variants whose calls from idle take under 0.2 ms get the profiled call of :mod:`aisp.harness.streams`.
Over it, the sync tail's allowance (10% of the events: 20 µs and up) is wider than what that tail
cannot see (work ending within the host's return from the end-event wait: 9-11 µs of a 30 µs spin
on an H200), so the profiler's start (seconds, once a process) would buy little."""


def _device_window(var: Variant, device: torch.device) -> bool:
    return device.type == "cuda" and var.bench.workload.window == "device"


def _sample_plan(var: Variant, options: RunOptions, device: torch.device, probe: Any,
                 issue_ms: list[float]) -> tuple[int, float]:
    """How many back-to-back calls make one sample (sustained timing: about SUSTAINED_BATCH_S of them)
    and the spacer (device window: sized from the warmup calls' issue times ``issue_ms`` and the probe's)."""
    calls = 1 if options.timing != "sustained" else max(1, round(SUSTAINED_BATCH_S * 1e3 / probe.host_ms))
    return calls, spacer_ms([*issue_ms, probe.issue_ms]) if _device_window(var, device) else 0.0


def _calls_per_sample(var: Variant, options: RunOptions, device: torch.device) -> tuple[int, float]:
    """IDLE_PROBES untimed calls from idle (the first call after gc.collect() and a sync is slow; on
    CUDA their sync tails are kept); returns :func:`_sample_plan` from the warmup and the last probe."""
    for _ in range(IDLE_PROBES):
        var.enter()
        probe = time_call(var.bench.run, device)
        if probe.tail_ms is not None:
            var.idle_probe_ms.append(probe.ms)
            var.idle_tail_ms.append(probe.tail_ms)
    calls, spacer = _sample_plan(var, options, device, probe, var.warm_issue_ms[-options.warmup:])
    if _device_window(var, device):
        var.enter()
        var.syncs_inside = syncs_inside(var.bench.run)
    if probe.tail_ms is not None:  # what the tail sync costs here with nothing left (EMPTY_PROBES)
        var.empty_tail_ms += empty_tails(device, spacer, time_call)
    return calls, spacer


def _can_trace(options: RunOptions, device: torch.device) -> bool:
    """Whether :func:`traced_leftover` can read the GPU's timestamps here: a GPU, and CUPTI free (our own
    profiler, or Nsight's injection, holds it under ``--profile`` or Nsight)."""
    return device.type == "cuda" and options.profile == "none" and "CUDA_INJECTION64_PATH" not in os.environ


def probe_streams(live: list[Variant], options: RunOptions, device: torch.device) -> None:
    """The profiled call of :mod:`aisp.harness.streams` (``stream_leftover_us``) for each variant whose
    calls from idle took under STREAM_PROBE_MAX_MS, after all timed samples: the first run of torch's
    profiler in a process slows the calls right after it (an H200, 2026-11-30: ch01:cuda_graphs' eager
    baseline 2.97 → 4.50 ms and its graph replay 0.164 → 0.253 ms, back within 2 s), so a probe before
    them slowed a short pair's timed samples (that pair read 55% of its ceiling, 96% with the probe after)."""
    if not _can_trace(options, device):
        return
    for var in live:
        if var.idle_probe_ms and statistics.median(var.idle_probe_ms) < STREAM_PROBE_MAX_MS:
            var.enter()
            var.stream_leftover_us, why = traced_leftover(var.bench.run, device)
            if why:
                var.evidence.notes.append(f"work on other streams not read from the GPU's timestamps: {why}")


def timed_functions(live: list[Variant], options: RunOptions, device: torch.device) -> dict[int, Callable[[], Any]]:
    """By id(variant), what a timed sample calls: ``run()``, or with ``--timing graph`` on CUDA the
    replay of its capture (a variant that cannot be captured keeps ``run()``, with a note)."""
    fns = {id(var): var.bench.run for var in live}
    if options.timing != "graph" or device.type != "cuda":
        return fns
    for var in live:
        var.enter()
        replay, why = graph_replay(var.bench.run, device)
        if replay is None:
            var.evidence.notes.append(f"--timing graph: run() could not be captured ({why}); timed per call")
        else:
            fns[id(var)] = replay
            var.evidence.notes.append("--timing graph: timed as replays of one capture of run(); the checked "
                                      "call runs run() itself")
    return fns


def _record(var: Variant, timed: Any) -> None:
    var.samples_ms.append(timed.ms)
    var.host_samples_ms.append(timed.host_ms)
    var.issue_samples_ms.append(timed.issue_ms)
    if timed.tail_ms is not None:
        var.tail_samples_ms.append(timed.tail_ms)
    var.windows.append((timed.start_s, timed.end_s))


@phase("timed")
def time_interleaved(variants: list[Variant], options: RunOptions, device: torch.device,
                     align: Callable[[Any], Any] = _alone, check: CheckPlan | None = None) -> dict[int, Any]:
    """Warm up, then time all live variants in rotating order from a random start; returns, by
    id(variant), a function that checks the call of iteration ``check.at`` (prepared outside the
    window) and copies its output. ``align(value)``: the ranks of a multi-rank pair meet and take
    rank 0's value (before each timed call, and for the choices all ranks must make alike)."""
    live = [v for v in variants if v.bench is not None]
    flush = l2_flusher(device) if options.flush_l2 else None
    offset = align(secrets.randbelow(len(live)))
    warm_up(live, options, device, offset, align)
    fns, last = timed_functions(live, options, device), {}
    with gc_disabled():
        plans = dict(zip(map(id, live), align([_calls_per_sample(v, options, device) for v in live]), strict=True))
        for var in live:
            var.spacer_ms = plans[id(var)][1]
        count = min(options.iterations, live[0].bench.workload.iterations or options.iterations)
        at = None if check is None else check.at % count
        for step in range(count + (at is not None)):
            i = step - (at is not None and step > at)  # the checked call repeats its turn's order
            for var in _rotation(live, offset + i):
                if step == at:
                    guard, originals = check.prepare(var.bench, var.known_after_setup)
                calls, spacer = plans[id(var)]
                spacer = align(spacer)  # the ranks meet; rank 0's spacer for all
                var.enter()
                with torch.cuda.nvtx.range(f"{var.name}/iter{step}") if device.type == "cuda" else nullcontext():
                    timed = time_call(var.bench.run if step == at else fns[id(var)], device, calls, spacer, flush)
                if step == at:
                    var.checked_call = step
                    last[id(var)] = guard.settle(timed.output, originals)
                    continue
                while _starved(var, timed, calls, spacer, align):  # it timed the host: again, in its slot
                    spacer = var.spacer_ms
                    plans[id(var)] = (calls, spacer)
                    var.enter()
                    timed = time_call(fns[id(var)], device, calls, spacer, flush)
                _record(var, timed)
    return last


SOLO_SAMPLES, SOLO_LONG_MS, SOLO_LONG_SAMPLES = 5, 50.0, 3
"""The baseline's samples alone (:func:`time_alone`): 5, or 3 where one call takes over 50 ms."""


@phase("timed")
def time_alone(var: Variant, options: RunOptions, device: torch.device) -> None:
    """The baseline's samples alone (``solo_samples_ms``), in the first verification pass (the seed
    drawn at random), after its verified call and before any other variant's setup(): what the
    results compare its interleaved samples with (:func:`aisp.harness.stats.slowed_beside`), so a
    variant that slows it through state they share (a CUDA-context limit, memory, a device setting, an
    object changed in place) is named. The interleaved samples' path: its own warmup (:func:`warm_up`:
    as many calls and seconds, so the clocks have settled), one untimed call from idle that sizes the
    plan, then SOLO_SAMPLES through :func:`time_call` with their calls per sample, spacer (grown and
    the sample taken again where the host outran it) and CUDA-graph replay. One difference: on CUDA
    the L2 is always evicted before each sample (outside the events, as ``--flush-l2`` does), since
    back-to-back calls alone find their own data in L2 where interleaved ones find the other
    variant's; evicted, the solo figure is never the faster for that reason alone, so the check can
    miss a slowdown that warm L2 would hide, never invent one. The SM clock is read after each sample
    (``solo_clock_mhz``): a GPU that warmed into its power cap later runs slower for that alone
    (:func:`aisp.harness.results.check_alone`). Costs a warmup, 1 + SOLO_SAMPLES calls
    and (CUDA) a graph capture and the eviction buffer; SOLO_LONG_SAMPLES for a call over SOLO_LONG_MS."""
    warm_up([var], options, device, 0)
    issue, fn = var.warm_issue_ms[-options.warmup:], var.bench.run
    read = nvml_reader(device) if device.type == "cuda" else None
    var.warm_issue_ms.clear()  # the interleaved warmup sizes their spacer afresh
    if options.timing == "graph" and device.type == "cuda":
        fn = graph_replay(fn, device)[0] or fn
    with gc_disabled():
        var.enter()
        probe = time_call(fn, device)
        (calls, spacer), flush = _sample_plan(var, options, device, probe, issue), l2_flusher(device)
        count = SOLO_SAMPLES if probe.ms <= SOLO_LONG_MS else SOLO_LONG_SAMPLES
        while len(var.solo_samples_ms) < count:
            var.enter()
            timed = time_call(fn, device, calls, spacer, flush)
            if (grown := grown_spacer(spacer, timed.issue_ms, timed.device_ms, calls)) > spacer:
                spacer = grown  # it timed the host: again
                continue
            var.solo_samples_ms.append(timed.ms)
            if read is not None:
                var.solo_clock_mhz.append(read().sm_clock_mhz)
    if count < SOLO_SAMPLES:
        var.evidence.notes.append(f"timed alone in {count} samples, not {SOLO_SAMPLES}: a call from idle took "
                                  f"{probe.ms:.4g} ms (over {SOLO_LONG_MS:g})")


def _starved(var: Variant, timed: Any, calls: int, spacer: float, align: Callable[[Any], Any]) -> bool:
    """Whether the sample is to be taken again: its one call was issued past the spacer's end
    (:func:`outran`; counted in ``starved_samples``) and the spacer, grown for the samples after
    (:func:`grown_spacer`), could still grow past it (counted in ``retaken_samples``). Every rank of a
    pair takes rank 0's answer."""
    if not align(not var.syncs_inside and outran(spacer, timed.issue_ms, timed.device_ms, calls)):
        return False
    var.starved_samples += 1
    var.spacer_ms = align(grown_spacer(spacer, timed.issue_ms, timed.device_ms, calls))
    var.retaken_samples += var.spacer_ms > spacer
    return var.spacer_ms > spacer


TRACE_CONFIRMS = 3
"""Profiled calls that read, from the GPU's timestamps, a variant whose timed or idle calls' sync tail said
it left work outside its events (:func:`confirm_tails`)."""


def confirm_tails(live: list[Variant], options: RunOptions, device: torch.device) -> None:
    """For each variant whose timed samples' sync tail (a host-timed device-wide sync), or its calls from
    idle's, says it left work outside its events, read the work on other streams from the GPU's own timestamps in TRACE_CONFIRMS
    profiled calls (``stream_leftover_us``: the longest). The host-timed tail also reads the host's
    wake-up jitter: under load, 10-40 µs past an empty call's tail on a decode kernel whose work is all
    on one stream (4 x H200, 2026-11-28). Where the timestamps show nothing and the other tail agrees,
    the results read the variant as timed right, with a note (:func:`aisp.harness.timing.tail_overruled`,
    :func:`aisp.harness.timing.idle_tail_overruled`)."""
    if not _can_trace(options, device):
        return
    for var in live:
        if not unseen_work(var.tail_samples_ms, var.samples_ms, empty_ms=var.empty_tail_ms) \
                and not unseen_work(var.idle_tail_ms, var.idle_probe_ms, empty_ms=var.empty_tail_ms):
            continue
        longest: float | None = 0.0
        for _ in range(TRACE_CONFIRMS):
            var.enter()
            leftover, why = traced_leftover(var.bench.run, device)
            if leftover is None:
                var.evidence.notes.append(f"{var.name}: its sync tail was not checked against the GPU's timestamps: {why}")
                longest = None
                break
            longest = max(longest, leftover)
        if longest is not None:
            var.stream_leftover_us = max(longest, var.stream_leftover_us or 0.0)
            overruled = tail_overruled(var.tail_samples_ms, var.samples_ms, var.empty_tail_ms, var.idle_tail_ms,
                                       var.idle_probe_ms, var.stream_leftover_us) or idle_tail_overruled(
                var.idle_tail_ms, var.idle_probe_ms, var.empty_tail_ms, var.tail_samples_ms, var.samples_ms,
                var.stream_leftover_us)
            if overruled:
                var.evidence.notes.append(f"{var.name}: {overruled}")


@phase("verify")
def verify_checked(variants: list[Variant], last: dict[int, Any], workload: Workload,
                   before: tuple[Any, ...] | None) -> None:
    """Each optimized output of the checked call against the baseline's on the same refilled inputs;
    the baseline's must differ from ``before`` (its output's fingerprint then; None: no inputs)."""
    base = variants[0]
    try:
        ref = last[id(base)]()
        if before is not None and tuple(fingerprint(t) for _, t in ref) == before:
            raise VerificationError(UNDRIVEN)
    except VerificationError as exc:
        base.fail("verify-failed", f"checked timed call: {exc}")
        for var in variants[1:]:
            var.fail("verify-failed", "not compared: the baseline failed the checked timed call")
        return
    for var in variants[1:]:
        try:
            var.evidence.merge(compare(ref, last[id(var)](), workload))
            var.evidence.checks.append("a timed call drawn at random, inputs refilled: matches baseline")
        except VerificationError as exc:
            var.fail("verify-failed", f"checked timed call: {exc} ({CHECK_HINT})")


def measure_memory(var: Variant, device: torch.device) -> None:
    """Peak memory of one untimed call, on top of what the variant holds before it (:data:`PEAK_METHOD`):
    allocated (the headline, ``peak_bytes``), reserved by torch's caching allocator (fragmentation and
    cached blocks included) and, where NVML can be read, the change of the device's used memory over the
    call (native cudaMalloc and NCCL buffers too; other processes on the GPU move it as well). What the
    call left allocated outside torch's allocator is ``run_outside_bytes`` (setup's: ``setup_outside_bytes``;
    neither is in ``peak_bytes``; a memory ratio adds them: :func:`aisp.harness.results.outside_excess`)."""
    var.enter()
    bench = var.bench
    if device.type == "cuda":
        _settle(device)
        before, reserved, used = _memory_now(device), _reserved_now(device), nvml_memory_reader(device)
        outside = _outside_now(device)
        nvml_before = used() if used is not None else None
        carried = max(0, held_bytes(bench, device.type) - var.held_after_setup)
        torch.cuda.reset_peak_memory_stats(device)
        bench.run()
        synchronize(device)
        transient = torch.cuda.max_memory_allocated(device) - before
        var.memory["run_peak_bytes"] = transient
        var.memory["carried_bytes"] = carried
        var.memory["peak_bytes"] = var.memory.get("setup_bytes", 0) + carried + transient
        var.memory["peak_method"] = PEAK_METHOD
        run_reserved = torch.cuda.max_memory_reserved(device) - reserved
        var.memory["run_peak_reserved_bytes"] = run_reserved
        var.memory["peak_reserved_bytes"] = var.memory.get("setup_reserved_bytes", 0) + run_reserved
        var.memory["nvml_used_delta_bytes"] = used() - nvml_before if used is not None else None
        var.memory["run_outside_bytes"] = _outside_now(device) - outside
    else:
        bench.run()
        # On a CPU only the process-wide peak RSS is known; per-variant peaks need --cold-start.
        var.memory["process_peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        var.memory["peak_bytes"] = None


def apply_reproducible(seed: int) -> None:
    """Deterministic algorithms everywhere; an op without one raises when it runs."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True


def describe_error(exc: BaseException, reproducible: bool) -> tuple[str, str]:
    """(verdict, reason) for an exception that stopped a variant."""
    if isinstance(exc, Unavailable):
        return "skipped", str(exc)
    if isinstance(exc, torch.cuda.OutOfMemoryError):
        return "error", f"out of memory: {str(exc).splitlines()[0]}"
    text = f"{type(exc).__name__}: {exc}"
    if reproducible and "deterministic" in str(exc):
        return "error", f"--reproducible: this pair uses an op with no deterministic implementation ({text})"
    return "error", text


def start(paths: list[Path], options: RunOptions) -> tuple[torch.device, list[Variant], ProcessSettings, Workload]:
    """This process's device, the pair's variants (watched for process-wide settings) and workload."""
    device = pick_device(options.device)
    if options.reproducible:
        apply_reproducible(options.seed)
    variants = [Variant(p) for p in paths]
    return device, variants, watch_settings(variants), load_benchmark(paths[0]).workload


@phase("memory")
def measure_standing(live: list[Variant], device: torch.device) -> list[Variant]:
    """Memory and metrics of the variants still standing after timing; returns them."""
    standing = [v for v in live if v.verdict == "pending"]
    for var in standing:
        measure_memory(var, device)
        var.metrics = dict(var.bench.metrics())
    return standing


@phase("teardown")
def teardown(variants: list[Variant]) -> None:
    """Tear down every variant still set up."""
    for var in variants:
        if var.bench is not None:
            var.bench.teardown()
            var.bench = None


def workload_dict(workload: Workload) -> dict[str, Any]:
    data = asdict(workload)
    data["type"] = type(workload).__name__
    return data


def timed_with_telemetry(live: list[Variant], options: RunOptions, device: torch.device,
                         telemetry_out: dict[str, Any] | None, align: Callable[[Any], Any] = _alone,
                         check: CheckPlan | None = None) -> dict[int, Any]:
    """time_interleaved with NVML sampled alongside (on CUDA); flags throttled samples. The threads'
    run-queue wait over the timed iterations goes in ``telemetry_out["cpu_wait"]`` (host busy), and the
    host's op dispatch cost read right after them in ``telemetry_out["dispatch_us"]`` (the host's speed,
    with whatever ran beside the pair still running), and the CPU it was read on in ``dispatch_cpu``."""
    read = nvml_reader(device) if device.type == "cuda" else None
    started = host.schedstat()

    def timed() -> dict[int, Any]:
        last = time_interleaved(live, options, device, align, check)
        if telemetry_out is not None:
            telemetry_out["cpu_wait"] = host.cpu_wait(started, host.schedstat())
            telemetry_out["dispatch_us"] = host.dispatch_us()
            telemetry_out["dispatch_cpu"] = host.current_cpu()
        return last
    if read is None:
        if telemetry_out is not None and device.type == "cuda":
            telemetry_out["unavailable"] = "NVML could not be read; throttling was not checked"
        return timed()
    with Telemetry(read) as tel:
        last = timed()
    for var in live:
        var.throttled = {i: r for i, (a, b) in enumerate(var.windows) if (r := tel.throttled(a, b))}
        var.timed_clock_mhz = tel.clock_over(var.windows)
    if telemetry_out is not None:
        telemetry_out.update(tel.summary())
    return last


def run_variants(paths: list[Path], options: RunOptions,
                 on_timed: Callable[[list[Variant], torch.device], None] | None = None,
                 on_workload: Callable[[Workload], None] | None = None,
                 telemetry_out: dict[str, Any] | None = None, plan: CheckPlan | None = None) -> tuple[
                     list[Variant], Workload | None, str | None]:
    """Verify and time a baseline (``paths[0]``) against its optimized files. Returns the variants,
    the workload, and a skip reason when the pair cannot run here. ``on_timed`` is called after
    timing with the live variants (profiling hooks in there); ``telemetry_out`` receives the NVML
    summary of the timed window; ``plan``: the run's secrets."""
    device, variants, settings, workload = start(paths, options)
    if on_workload is not None:
        on_workload(workload)
    skip = unmet_requirements(workload.requires, device)
    if skip:
        return variants, workload, skip
    plan = plan or CheckPlan.draw(options.seed, options.iterations)
    timed = not options.verify_only and workload.headline == "time" and len(variants) > 1
    alone = functools.partial(time_alone, options=options, device=device) if timed else None
    verify_seed(variants, workload, device, plan.fresh_seed, False, options.reproducible, alone)
    before = verify_seed(variants, workload, device, options.seed, True, options.reproducible)
    settings.snapshot_modules()  # modules run() imported on its first calls
    if options.verify_only:
        return variants, workload, None
    live = [variants[0]] + [v for v in variants[1:] if v.verdict == "pending"]
    if len(live) > 1:
        last = timed_with_telemetry(live, options, device, telemetry_out, check=plan)
        verify_checked(live, last, workload, before)
        del last
        probe_streams(live, options, device)
        confirm_tails(live, options, device)
        standing = measure_standing(live, device)
        if on_timed is not None:
            with phase("profile"):
                on_timed(standing, device)
    settings.enter(None)
    teardown(variants)
    return variants, workload, None


@dataclass(frozen=True)
class ColdCheck:
    """A cold process checks one timed call: the baseline's (run first) saves its output to ``reference``."""

    plan: CheckPlan
    reference: Path
    baseline: bool


def _time_cold(var: Variant, options: RunOptions, device: torch.device, cold: ColdCheck) -> None:
    checked = time_interleaved([var], options, device, check=cold.plan)[id(var)]()
    probe_streams([var], options, device)
    if cold.baseline:
        torch.save([(p, t.cpu()) for p, t in checked], cold.reference)
    else:
        var.evidence.merge(compare(torch.load(cold.reference, weights_only=True), checked, var.bench.workload))
        var.evidence.checks.append("cold process: a timed call drawn at random matches the baseline's")


def time_single(path: Path, options: RunOptions, cold: ColdCheck,
                on_workload: Callable[[Workload], None] | None = None) -> Variant:
    """Cold start: set up and time one variant alone in this fresh process, checking one timed call."""
    device, (var,), _, _ = start([path], options)
    set_up(var, device, options.seed)
    if on_workload is not None:
        on_workload(var.bench.workload)
    try:
        _time_cold(var, options, device, cold)
        measure_standing([var], device)
    except VerificationError as exc:
        var.fail("verify-failed", f"cold process: checked timed call: {exc} ({CHECK_HINT})")
    teardown([var])
    return var
