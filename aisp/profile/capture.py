"""Profiling set-up variants with torch.profiler: Chrome traces, op tables, memory timelines, summaries.

The harness calls :func:`capture_torch` after timing, so profiling never touches a timed sample.
Nsight tools run a variant's file standalone: :func:`run_ncu` (aisp.profile.ncu) and :func:`run_nsys`
(aisp.profile.nsight).
"""

from __future__ import annotations

import warnings
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from aisp.harness.artifacts import atomic_write_json, atomic_write_text
from aisp.harness.benchmark import Benchmark
from aisp.harness.timing import synchronize
from aisp.profile.ncu import run_ncu
from aisp.profile.nsight import run_nsys
from aisp.profile.trace_events import load_memory_events
from aisp.profile.trace_summary import TraceSummary, summarize_trace

__all__ = ["TraceSummary", "capture_torch", "capture_for_run", "run_ncu", "run_nsys", "summarize_trace"]

OPS_ROWS = 25
MEMORY_HISTORY_ENTRIES = 100_000


def capture_torch(variants: dict[str, Benchmark], out_dir: Path, iterations: int = 3) -> dict:
    """Profile ``iterations`` steady-state ``run()`` calls of each set-up, warmed variant.

    Writes ``<variant>.trace.json`` (Chrome/Perfetto), ``<variant>.ops.txt`` (key_averages),
    ``<variant>.memory.json`` (allocations from the trace) and, on CUDA,
    ``<variant>.memory.pickle`` (a CUDA memory snapshot for pytorch.org/memory_viz).
    Returns ``{variant: summary dict}`` with the files it wrote under ``"files"``.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return {name: _capture_one(name, bench, out_dir, iterations) for name, bench in variants.items()}


SUMMARY_FILE = "profile_summary.json"


def capture_for_run(variants: dict[str, Benchmark], out_dir: Path) -> None:
    """The harness's ``on_timed`` hook: capture each variant and write ``profile_summary.json``,
    which :func:`aisp.profile.pair.attach_profile` adds to the pair's result."""
    atomic_write_json(Path(out_dir) / SUMMARY_FILE, {"variants": capture_torch(variants, out_dir)})


def _capture_one(name: str, bench: Benchmark, out_dir: Path, iterations: int) -> dict[str, Any]:
    files = {"trace": out_dir / f"{name}.trace.json", "ops": out_dir / f"{name}.ops.txt",
             "memory": out_dir / f"{name}.memory.json"}
    prof = _profile(bench, name, iterations)
    prof.export_chrome_trace(str(files["trace"]))
    atomic_write_text(files["ops"], _ops_tables(prof, bench.device))
    atomic_write_json(files["memory"], memory_timeline(files["trace"], name))
    if bench.device.type == "cuda":
        files["memory_snapshot"] = out_dir / f"{name}.memory.pickle"
        _cuda_memory_snapshot(bench, name, iterations, files["memory_snapshot"])
    summary = summarize_trace(files["trace"]).to_dict()
    return summary | {"variant": name, "profiled_iterations": iterations,
                      "files": {k: str(v) for k, v in files.items()}}


def _profile(bench: Benchmark, name: str, iterations: int) -> profile:
    activities = [ProfilerActivity.CPU]
    if bench.device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    plan = schedule(wait=0, warmup=1, active=iterations, repeat=1)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Profiler clears events", category=UserWarning)
        return _profile_steps(bench, name, iterations, activities, plan)


def _profile_steps(bench: Benchmark, name: str, iterations: int, activities: list[ProfilerActivity],
                   plan: Any) -> profile:
    """One profiler warmup step (its overhead stays out of the trace), then ``iterations`` traced."""
    with profile(activities=activities, schedule=plan, record_shapes=True, profile_memory=True,
                 with_stack=False) as prof:
        for _ in range(iterations + 1):
            _iteration(bench, name)
            prof.step()
    return prof


def _iteration(bench: Benchmark, name: str) -> None:
    """One ``run()`` inside a record_function (and, on CUDA, an NVTX) range named after the variant,
    synchronized inside the range so its device work belongs to it."""
    with ExitStack() as ranges:
        ranges.enter_context(record_function(name))
        if bench.device.type == "cuda":
            ranges.enter_context(torch.cuda.nvtx.range(name))
        bench.run()
        synchronize(bench.device)


def _ops_tables(prof: profile, device: torch.device) -> str:
    sort = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    by_op = prof.key_averages().table(sort_by=sort, row_limit=OPS_ROWS)
    by_shape = prof.key_averages(group_by_input_shape=True).table(sort_by=sort, row_limit=OPS_ROWS)
    return f"Top ops by {sort}\n{by_op}\n\nBy input shape\n{by_shape}\n"


def memory_timeline(trace: Path, variant: str) -> dict[str, Any]:
    """Allocations and frees recorded in ``trace`` (``profile_memory=True``), with the peak per device."""
    raw = load_memory_events(trace)
    t0 = min((e["ts"] for e in raw), default=0.0)
    events, peak = [], {}
    for e in sorted(raw, key=lambda ev: ev["ts"]):
        args = e.get("args", {})
        device = _device_label(args.get("Device Type", 0), args.get("Device Id", -1))
        allocated = int(args.get("Total Allocated", 0))
        peak[device] = max(peak.get(device, 0), allocated)
        events.append({"t_us": e["ts"] - t0, "device": device, "bytes": int(args.get("Bytes", 0)),
                       "total_allocated": allocated, "total_reserved": int(args.get("Total Reserved", 0))})
    return {"variant": variant, "trace": str(trace), "peak_allocated_bytes": peak, "events": events}


def _device_label(device_type: int, device_id: int) -> str:
    """c10 DeviceType 1 is CUDA; everything else here is host memory."""
    return f"cuda:{device_id}" if device_type == 1 else "cpu"


def _cuda_memory_snapshot(bench: Benchmark, name: str, iterations: int, path: Path) -> None:
    """Record the caching allocator's history over ``iterations`` runs (a separate pass, so the
    recording's overhead stays out of the trace) and dump the snapshot."""
    torch.cuda.memory._record_memory_history(max_entries=MEMORY_HISTORY_ENTRIES)
    try:
        for _ in range(iterations):
            _iteration(bench, name)
        torch.cuda.memory._dump_snapshot(str(path))
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
