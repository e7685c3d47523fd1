"""The CUDA caching allocator's history over a variant's ``run()`` calls: ``aisp profile run --tool memory``.

Each variant is loaded, set up and warmed alone (:func:`aisp.profile.setup.set_up_here` on one
variant at a time), so its snapshot holds its own memory and not the other variants'. Its setup runs
with the allocator keeping the Python stack of every live block; its ``iterations`` profiled
``run()`` calls run with the full history on (``torch.cuda.memory._record_memory_history``, every
alloc and free with its stack). The snapshot is written as ``<variant>.memory.pickle`` (drop it on
https://pytorch.org/memory_viz) and summarized by :func:`summarize_snapshot`, which needs no GPU:
the peak of the bytes allocated within the recorded window, the bytes already live when it began,
and where the allocations live at the peak (and at the start) were made. Sizes are the bytes
asked for, as the snapshot records them and memory_viz plots them, before the allocator rounds
each block up (to 512 bytes or more), so they can read a little below ``memory_allocated()``.
"""

from __future__ import annotations

import gc
import os
import pickle
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from aisp.harness.benchmark import Benchmark
from aisp.harness.discovery import repo_root
from aisp.harness.timing import synchronize
from aisp.profile.setup import set_up_here

NEEDS_CUDA = "needs a CUDA GPU; this run has none"
"""Every variant's skip reason without CUDA: the history is the CUDA caching allocator's."""
HISTORY_ENTRIES = 200_000
"""Allocator events kept per variant; past this the oldest are dropped (``history_full`` in the summary)."""
TOP = 8
"""Rows of a grouping; the rest are summed as ``other``."""
FREES = frozenset({"free_completed", "free"})
"""The trace actions that return a block (``free`` in snapshots older than ``free_completed``); the
bytes stay allocated from ``free_requested`` until then, as the allocator counts them."""
NO_STACK = "(no Python stack: autograd's backward thread, or before recording)"
"""Where a block without frames was made: autograd runs backward on its own thread, which has no
Python stack (on the H200 the gradients of every training pair landed here), or before recording."""
INSTALLED = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")


class Live(NamedTuple):
    """One allocation the replay holds live: its requested bytes and its stack, innermost frame first."""

    size: int
    frames: list[dict[str, Any]]


def record_memory(files: dict[str, Path], out_dir: Path, iterations: int, warmup: int) -> dict[str, Any]:
    """Record each variant's ``iterations`` ``run()`` calls after ``warmup`` untraced ones, set up
    alone; ``{variant: summary}`` (see :func:`summarize_snapshot`) with the pickle under ``files``,
    every variant ``{"skipped": reason}`` without CUDA or where the pair cannot run here."""
    import torch

    if not torch.cuda.is_available():
        return {name: {"skipped": NEEDS_CUDA} for name in files}
    root = repo_root()

    def record(benches: dict[str, Benchmark]) -> dict[str, Any]:
        return {name: _record_one(name, bench, out_dir, iterations, root) for name, bench in benches.items()}

    found: dict[str, Any] = {}
    for name, path in files.items():
        gc.collect()  # the previous variant's tensors are freed before this one's are made
        with _history("state", context="state"):  # setup's blocks keep the stack that made them
            found |= set_up_here({name: path}, warmup, record)
    return found


@contextmanager
def _history(enabled: str, **options: Any) -> Iterator[None]:
    """The allocator's history recorded (Python stacks) while the block runs; off after it."""
    import torch

    torch.cuda.memory._record_memory_history(enabled=enabled, stacks="python", **options)
    try:
        yield
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)


def _record_one(name: str, bench: Benchmark, out_dir: Path, iterations: int, root: Path) -> dict[str, Any]:
    import torch

    if bench.device.type != "cuda":
        return {"skipped": f"runs on {bench.device.type}: no CUDA allocation to record"}
    with _history("all", max_entries=HISTORY_ENTRIES, clear_history=True):
        for _ in range(iterations):
            bench.run()
        synchronize(bench.device)
        snapshot = torch.cuda.memory._snapshot()
    path = out_dir / f"{name}.memory.pickle"
    path.write_bytes(pickle.dumps(snapshot))
    device = torch.cuda.current_device() if bench.device.index is None else bench.device.index
    return summarize_snapshot(snapshot, device, root) | {
        "variant": name, "profiled_iterations": iterations, "files": {"memory_snapshot": str(path)}}


def summarize_snapshot(snapshot: dict[str, Any], device: int, root: Path) -> dict[str, Any]:
    """The window a snapshot's ``device_traces[device]`` recorded, replayed from the blocks live
    when it began (:func:`live_at_start`): ``peak_bytes`` (the most bytes allocated at once in the
    window, those live at its start included), ``start_bytes``, ``end_bytes``; ``at_peak`` and
    ``at_start``, the allocations live then grouped by where they were made (:func:`group`);
    ``entries`` (trace events) and ``history_full`` (the oldest events may have been dropped: the
    window then starts at the oldest one kept)."""
    traces = snapshot.get("device_traces") or []
    trace = traces[device] if device < len(traces) else []
    start = live_at_start(trace, _blocks(snapshot, device))
    end, peak_at, peak = _replay(trace, start, len(trace))
    at_peak, _, _ = _replay(trace, start, peak_at)
    return {"device": f"cuda:{device}", "peak_bytes": peak, "start_bytes": _total(start.values()),
            "end_bytes": _total(end.values()), "entries": len(trace), "history_full": len(trace) >= HISTORY_ENTRIES,
            "at_peak": group(at_peak.values(), root), "at_start": group(start.values(), root)}


def live_at_start(trace: list[dict[str, Any]], blocks: Iterable[dict[str, Any]]) -> dict[int, Live]:
    """The allocations live when the trace began, by address: each one the trace frees before
    allocating anything at its address (its stack unknown: the trace holds where it was freed),
    and each block live at the end (``active_*``) that no allocation of the trace made. Neither
    kind is an allocation of the trace, so replaying the trace from them counts no byte twice."""
    start: dict[int, Live] = {}
    made: set[int] = set()  # addresses the trace allocated and has not freed
    for entry in trace:
        if entry["action"] == "alloc":
            made.add(entry["addr"])
        elif entry["action"] in FREES and entry["addr"] in made:
            made.remove(entry["addr"])
        elif entry["action"] in FREES:
            start[entry["addr"]] = Live(entry["size"], [])
    for block in blocks:
        if block["state"].startswith("active") and block["address"] not in made:
            start[block["address"]] = Live(block.get("requested_size", block["size"]), block.get("frames") or [])
    return start


def _blocks(snapshot: dict[str, Any], device: int) -> Iterator[dict[str, Any]]:
    """The blocks of ``device``'s segments, each with its ``address`` (counted from its segment's
    where a snapshot gives none)."""
    for segment in snapshot.get("segments") or []:
        if segment.get("device", device) != device:
            continue
        address = segment["address"]
        for block in segment["blocks"]:
            yield {"address": address, **block}
            address += block["size"]


def _replay(trace: list[dict[str, Any]], start: dict[int, Live], until: int) -> tuple[dict[int, Live], int, int]:
    """The first ``until`` entries of ``trace`` replayed from ``start``: the allocations live after
    them, how many entries had run when the most bytes were live (0: before the first), and those bytes."""
    live = dict(start)
    now = peak = _total(live.values())
    peak_at = 0
    for i, entry in enumerate(trace[:until], 1):
        if entry["action"] == "alloc":
            live[entry["addr"]] = Live(entry["size"], entry.get("frames") or [])
            now += entry["size"]
        elif entry["action"] in FREES and entry["addr"] in live:
            now -= live.pop(entry["addr"]).size
        if now > peak:
            peak, peak_at = now, i
    return live, peak_at, peak


def _total(allocations: Iterable[Live]) -> int:
    return sum(a.size for a in allocations)


def group(allocations: Iterable[Live], root: Path) -> list[dict[str, Any]]:
    """Allocations grouped by :func:`where` they were made: ``[{"where", "bytes", "count"}]``, the
    most bytes first; past :data:`TOP` rows the rest are one ``other`` row."""
    rows: dict[str, dict[str, Any]] = {}
    for a in allocations:
        row = rows.setdefault(where(a.frames, root), {"bytes": 0, "count": 0})
        row["bytes"] += a.size
        row["count"] += 1
    ranked = sorted(rows.items(), key=lambda item: (-item[1]["bytes"], item[0]))
    shown = [{"where": name, **row} for name, row in ranked[:TOP]]
    rest = [row for _, row in ranked[TOP:]]
    if rest:
        shown.append({"where": "other", "bytes": sum(r["bytes"] for r in rest), "count": sum(r["count"] for r in rest)})
    return shown


def where(frames: list[dict[str, Any]], root: Path) -> str:
    """``path:line:function`` of the innermost frame in a file of the repository at ``root`` (not
    an installed package such as torch), else of the innermost frame; :data:`NO_STACK` without one."""
    if not frames:
        return NO_STACK
    prefix = str(root) + os.sep
    ours = [f for f in frames if f["filename"].startswith(prefix) and not any(p in f["filename"] for p in INSTALLED)]
    frame = (ours or frames)[0]
    filename = frame["filename"].removeprefix(prefix)
    for installed in INSTALLED:
        filename = filename.rpartition(installed)[2]  # torch/nn/modules/linear.py, not its full path
    return f"{filename}:{frame['line']}:{frame['name']}"


def format_bytes(value: int) -> str:
    """``1.25 GiB``, ``3.0 MiB``, ``12.0 KiB``, ``512 B``."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {unit}" if unit == "GiB" else f"{value / scale:.1f} {unit}"
    return f"{value} B"
