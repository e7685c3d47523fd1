"""Running one pair inside its worker process: verify, then time interleaved, then measure memory."""

from __future__ import annotations

import gc
import os
import resource
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from aisp.harness.benchmark import Benchmark, Workload, unmet_requirements
from aisp.harness.loader import load_benchmark
from aisp.harness.options import RunOptions
from aisp.harness.telemetry import Telemetry, nvml_reader
from aisp.harness.timing import L2Flusher, gc_disabled, synchronize, time_call
from aisp.harness.verify import (
    Evidence,
    InputGuard,
    VerificationError,
    check_fresh,
    compare,
    detach_copy,
    poison_scratch,
    preexisting_storages,
    tensor_attributes,
)

POISON_HINT = ("before the last timed iteration, `scratch` buffers and tensors created after setup() "
               "were overwritten with NaN; a run() that skips its work returns them. Create reused "
               "constants in setup()")


@dataclass
class Variant:
    """One file of the pair and what happened to it in this process."""

    path: Path
    bench: Benchmark | None = None
    samples_ms: list[float] = field(default_factory=list)
    host_samples_ms: list[float] = field(default_factory=list)
    verdict: str = "pending"
    reason: str | None = None
    evidence: Evidence = field(default_factory=Evidence)
    memory: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    known_after_setup: set[str] = field(default_factory=set)
    windows: list[tuple[float, float]] = field(default_factory=list)
    throttled: dict[int, list[str]] = field(default_factory=dict)
    """Timed sample index → throttle reasons NVML reported during it."""

    @property
    def name(self) -> str:
        return self.path.stem

    def fail(self, verdict: str, reason: str) -> None:
        self.verdict, self.reason = verdict, reason


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
    holds right after setup (what the last-iteration poisoning treats as known)."""
    bench = load_benchmark(var.path)
    bench.device, bench.seed = device, seed
    _settle(device)
    before = _memory_now(device)
    bench.setup()
    _settle(device)
    var.bench = bench
    var.memory["setup_bytes"] = _memory_now(device) - before
    var.known_after_setup = set(tensor_attributes(bench))
    return bench


def guarded_run(bench: Benchmark) -> list[tuple[str, torch.Tensor]]:
    """One verified call: inputs unchanged, output fresh and not aliasing an input."""
    guard = InputGuard(bench)
    before = preexisting_storages(bench)
    output = bench.run()
    synchronize(bench.device)
    check_fresh(output, before)
    changed = guard.changed(bench)
    if changed:
        raise VerificationError(
            f"run() changed its inputs {changed}: list buffers it overwrites in `scratch` and state it "
            "updates in `state`, or leave inputs alone")
    return detach_copy(output)


def verify_seed(variants: list[Variant], workload: Workload, device: torch.device, seed: int,
                keep: bool, reproducible: bool = False) -> None:
    """Build every variant at ``seed``, run each once, compare each optimized with the baseline.

    With ``keep`` the set-up benchmarks stay on the variants for timing; otherwise torn down.
    """
    base = variants[0]
    ref = guarded_run(set_up(base, device, seed))
    if not keep:
        base.bench.teardown()
        base.bench = None
    for var in variants[1:]:
        if var.verdict != "pending":
            continue
        skip = unmet_requirements(load_benchmark(var.path).workload.requires, device)
        if skip:
            var.fail("skipped", skip)
            continue
        try:
            var.evidence.merge(compare(ref, guarded_run(set_up(var, device, seed)), workload))
            var.evidence.checks.append(f"seed {seed}: matches baseline")
        except VerificationError as exc:
            var.fail("verify-failed", f"seed {seed}: {exc}")
        except Exception as exc:  # one broken variant must not stop the others
            traceback.print_exc()
            var.fail(*describe_error(exc, reproducible))
        if not keep or var.verdict != "pending":
            if var.bench is not None:
                var.bench.teardown()
                var.bench = None
    del ref


def _rotation(n: int, i: int) -> list[int]:
    return [(i + k) % n for k in range(n)]


def time_interleaved(variants: list[Variant], options: RunOptions, device: torch.device,
                     align: Callable[[], None] | None = None) -> dict[str, Any]:
    """Warm up, then time all live variants in rotating order; returns the last outputs by id(variant).

    ``align`` is called right before each timed call, outside the window (ranks meet at a barrier).
    """
    live = [v for v in variants if v.bench is not None]
    flush = L2Flusher(device) if options.flush_l2 else None
    for i in range(options.warmup):
        for j in _rotation(len(live), i):
            live[j].bench.run()
    synchronize(device)
    last: dict[str, Any] = {}
    with gc_disabled():
        for i in range(options.iterations):
            final = i == options.iterations - 1
            for j in _rotation(len(live), i):
                var = live[j]
                if final:
                    poison_scratch(var.bench, var.known_after_setup)
                    before = preexisting_storages(var.bench)
                if flush:
                    flush()
                if align:
                    align()
                with _nvtx(f"{var.name}/iter{i}", device):
                    timed = time_call(var.bench.run, device)
                var.samples_ms.append(timed.ms)
                var.host_samples_ms.append(timed.host_ms)
                var.windows.append((timed.start_s, timed.end_s))
                if final:
                    last[id(var)] = (timed.output, before)
    return last


class _nvtx:
    """An NVTX range on CUDA, so Nsight timelines show variant and iteration; nothing on CPU."""

    def __init__(self, label: str, device: torch.device) -> None:
        self.label, self.on = label, device.type == "cuda"

    def __enter__(self) -> None:
        if self.on:
            torch.cuda.nvtx.range_push(self.label)

    def __exit__(self, *exc: object) -> None:
        if self.on:
            torch.cuda.nvtx.range_pop()


def verify_last(variants: list[Variant], last: dict[str, Any], workload: Workload) -> None:
    """Re-verify the outputs of the last timed iteration (scratch was poisoned before it)."""
    base = variants[0]
    output, before = last[id(base)]
    check_fresh(output, before)
    ref = detach_copy(output)
    for var in variants[1:]:
        if id(var) not in last:
            continue
        output, before = last[id(var)]
        try:
            check_fresh(output, before)
            var.evidence.merge(compare(ref, detach_copy(output), workload))
            var.evidence.checks.append("last timed iteration: matches baseline (scratch poisoned before it)")
        except VerificationError as exc:
            var.fail("verify-failed", f"last timed iteration: {exc} ({POISON_HINT})")
            var.samples_ms.clear()
            var.host_samples_ms.clear()


def measure_memory(var: Variant, device: torch.device) -> None:
    """Peak memory of one untimed call, on top of what the variant's setup keeps."""
    bench = var.bench
    if device.type == "cuda":
        _settle(device)
        before = _memory_now(device)
        torch.cuda.reset_peak_memory_stats(device)
        bench.run()
        synchronize(device)
        transient = torch.cuda.max_memory_allocated(device) - before
        var.memory["run_peak_bytes"] = transient
        var.memory["peak_bytes"] = var.memory.get("setup_bytes", 0) + transient
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
    if isinstance(exc, torch.cuda.OutOfMemoryError):
        return "error", f"out of memory: {str(exc).splitlines()[0]}"
    text = f"{type(exc).__name__}: {exc}"
    if reproducible and "deterministic" in str(exc):
        return "error", f"--reproducible: this pair uses an op with no deterministic implementation ({text})"
    return "error", text


def workload_dict(workload: Workload) -> dict[str, Any]:
    data = asdict(workload)
    data["type"] = type(workload).__name__
    return data


def timed_with_telemetry(live: list[Variant], options: RunOptions, device: torch.device,
                         telemetry_out: dict[str, Any] | None,
                         align: Callable[[], None] | None = None) -> dict[int, Any]:
    """time_interleaved with NVML sampled alongside (on CUDA); flags throttled samples."""
    read = nvml_reader(device) if device.type == "cuda" else None
    if read is None:
        if telemetry_out is not None and device.type == "cuda":
            telemetry_out["unavailable"] = "NVML could not be read; throttling was not checked"
        return time_interleaved(live, options, device, align)
    with Telemetry(read) as tel:
        last = time_interleaved(live, options, device, align)
    for var in live:
        var.throttled = {i: r for i, (a, b) in enumerate(var.windows) if (r := tel.throttled(a, b))}
    if telemetry_out is not None:
        telemetry_out.update(tel.summary())
    return last


def run_variants(paths: list[Path], options: RunOptions,
                 on_timed: Callable[[list[Variant], torch.device], None] | None = None,
                 on_workload: Callable[[Workload], None] | None = None,
                 telemetry_out: dict[str, Any] | None = None) -> tuple[
                     list[Variant], Workload | None, str | None]:
    """Verify and time a baseline (``paths[0]``) against its optimized files.

    Returns the variants, the workload, and a skip reason when the pair cannot run here.
    ``on_timed`` is called after timing with the live variants (profiling hooks in there);
    ``telemetry_out`` receives the NVML summary of the timed window.
    """
    device = pick_device(options.device)
    if options.reproducible:
        apply_reproducible(options.seed)
    variants = [Variant(p) for p in paths]
    workload = load_benchmark(paths[0]).workload
    if on_workload is not None:
        on_workload(workload)
    skip = unmet_requirements(workload.requires, device)
    if skip:
        return variants, workload, skip
    verify_seed(variants, workload, device, options.seed + 1, False, options.reproducible)
    verify_seed(variants, workload, device, options.seed, True, options.reproducible)
    if options.verify_only:
        return variants, workload, None
    live = [variants[0]] + [v for v in variants[1:] if v.verdict == "pending"]
    if len(live) > 1:
        last = timed_with_telemetry(live, options, device, telemetry_out)
        verify_last(live, last, workload)
        del last
        for var in live:
            if var.verdict == "pending":
                measure_memory(var, device)
                var.metrics = dict(var.bench.metrics())
        if on_timed is not None:
            on_timed([v for v in live if v.verdict == "pending"], device)
    for var in variants:
        if var.bench is not None:
            var.bench.teardown()
            var.bench = None
    return variants, workload, None


def time_single(path: Path, options: RunOptions,
                on_workload: Callable[[Workload], None] | None = None) -> Variant:
    """Cold start: set up and time one variant alone in this fresh process (no verification)."""
    device = pick_device(options.device)
    if options.reproducible:
        apply_reproducible(options.seed)
    var = Variant(path)
    set_up(var, device, options.seed)
    if on_workload is not None:
        on_workload(var.bench.workload)
    time_interleaved([var], options, device)
    measure_memory(var, device)
    var.metrics = dict(var.bench.metrics())
    var.bench.teardown()
    var.bench = None
    return var
