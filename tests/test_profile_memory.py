"""``aisp profile run --tool memory``: snapshots of the CUDA caching allocator built by hand in its
format (``torch.cuda.memory._snapshot()``) summarized on the CPU (the peak in the window, the state
live before recording counted once, the grouping by the first frame in the repository), the CLI's
refusals and its table, and, on a GPU, a pair's peak against the bytes its tensors hold."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest
import torch
from pair_variants import variant_names
from rich.console import Console
from typer.testing import CliRunner

from aisp.cli.main import app
from aisp.harness.verify import held_bytes
from aisp.profile import memory
from aisp.profile.memory import NEEDS_CUDA, NO_STACK, format_bytes, summarize_snapshot
from aisp.profile.pair import ProfileRequest, profile_target

ROOT = Path("/repo")
TORCH = {"filename": "/repo/.venv/lib/python3.11/site-packages/torch/nn/functional.py", "line": 7, "name": "linear"}
"""A torch frame: under the repository (a virtual environment inside it), but an installed package."""
MODEL = {"filename": "/repo/aisp/kits/gpt.py", "line": 40, "name": "forward"}
RUN = {"filename": "/repo/ch13/baseline_x.py", "line": 12, "name": "run"}
SETUP = {"filename": "/repo/ch13/baseline_x.py", "line": 5, "name": "setup"}


def alloc(addr: int, size: int, *frames: dict[str, Any]) -> dict[str, Any]:
    return {"action": "alloc", "addr": addr, "size": size, "stream": 0, "frames": list(frames)}


def free(addr: int, size: int, completed: bool = True) -> list[dict[str, Any]]:
    """A free as the allocator records it: requested, then completed (when its stream uses are done)."""
    requested = {"action": "free_requested", "addr": addr, "size": size, "stream": 0, "frames": [RUN]}
    return [requested, {**requested, "action": "free_completed"}] if completed else [requested]


def block(size: int, state: str = "active_allocated", *frames: dict[str, Any]) -> dict[str, Any]:
    return {"size": size, "requested_size": size, "state": state, "frames": list(frames)}


def snapshot(trace: list[dict[str, Any]], blocks: list[dict[str, Any]], address: int = 0x1000) -> dict[str, Any]:
    """One segment on device 0 holding ``blocks`` from ``address`` on (each block's address is its
    segment's plus the sizes before it, as the allocator lays them out)."""
    laid, at = [], address
    for b in blocks:
        laid.append({"address": at, **b})
        at += b["size"]
    segment = {"device": 0, "address": address, "total_size": at - address, "stream": 0, "blocks": laid}
    return {"segments": [segment], "device_traces": [trace]}


def test_the_peak_is_the_most_live_at_once_within_the_window() -> None:
    """alloc A, alloc B, free A, alloc C (smaller than A): the peak is A + B, not the sum of every
    allocation (a replay that ignored frees) nor the end (B + C)."""
    a, b, c = 0x1000, 0x1000 + 512, 0x1000 + 768
    trace = [alloc(a, 512, MODEL), alloc(b, 256, RUN), *free(a, 512), alloc(c, 128, RUN)]
    found = summarize_snapshot(snapshot(trace, [block(512, "inactive"), block(256), block(128)]), 0, ROOT)
    assert (found["peak_bytes"], found["start_bytes"], found["end_bytes"]) == (768, 0, 384)
    assert found["at_peak"] == [{"where": "aisp/kits/gpt.py:40:forward", "bytes": 512, "count": 1},
                                {"where": "ch13/baseline_x.py:12:run", "bytes": 256, "count": 1}]


def test_a_block_is_freed_when_its_free_completes_not_when_it_is_requested() -> None:
    """Memory used on another stream is returned once that stream is done: from free_requested to
    free_completed it still counts, so C allocated in between stacks on A and B."""
    a, b, c = 0x1000, 0x1200, 0x1300
    trace = [alloc(a, 512), alloc(b, 256), *free(a, 512, completed=False), alloc(c, 128), free(a, 512)[1]]
    found = summarize_snapshot(snapshot(trace, [block(512, "inactive"), block(256), block(128)]), 0, ROOT)
    assert found["peak_bytes"] == 512 + 256 + 128


def test_the_state_live_before_recording_is_counted_once() -> None:
    """S stays live throughout (only the segments show it), P is freed in the window with no alloc
    before it, D is allocated in the window and still live at the end (in the trace and in the
    segments: counted once), and a block pending its free still holds its bytes."""
    d, p = 0x1000 + 1024 + 512, 0x9000  # S at 0x1000, the pending block after it, then D
    blocks = [block(1024, "active_allocated", TORCH, SETUP), block(512, "active_pending_free"), block(100),
              block(4096, "inactive")]
    trace = [alloc(d, 100, RUN), *free(p, 64)]
    found = summarize_snapshot(snapshot(trace, blocks), 0, ROOT)
    assert found["start_bytes"] == 1024 + 512 + 64
    assert found["peak_bytes"] == 1024 + 512 + 64 + 100
    assert found["end_bytes"] == 1024 + 512 + 100
    assert found["at_start"] == [{"where": "ch13/baseline_x.py:5:setup", "bytes": 1024, "count": 1},
                                 {"where": NO_STACK, "bytes": 512 + 64, "count": 2}]


def test_a_free_before_any_alloc_at_its_address_changes_the_peak() -> None:
    """The same entries in another order: allocated then freed, the 32 bytes are gone before the 64
    come (peak 64); freed first, they were live before the window began, and the 32 allocated at
    their address after stay live with the 64 (peak 96)."""
    first_alloc = [alloc(0x1000, 32), *free(0x1000, 32), alloc(0x1020, 64)]
    first_free = [*free(0x1000, 32), alloc(0x1000, 32), alloc(0x1020, 64)]
    assert summarize_snapshot(snapshot(first_alloc, [block(32, "inactive"), block(64)]), 0, ROOT)["peak_bytes"] == 64
    assert summarize_snapshot(snapshot(first_free, [block(32), block(64)]), 0, ROOT)["peak_bytes"] == 96


def test_allocations_are_grouped_by_their_first_frame_in_the_repository() -> None:
    """Innermost frame first: torch's own frame (an installed package, even inside the repository)
    is passed over for the model's line; a stack of torch frames only falls back to the innermost,
    shortened to its package path; no stack at all is said so."""
    trace = [alloc(0x1000, 64, TORCH, MODEL, RUN), alloc(0x2000, 64, MODEL, RUN), alloc(0x3000, 16, TORCH),
             alloc(0x4000, 8)]
    found = summarize_snapshot({"segments": [], "device_traces": [trace]}, 0, ROOT)
    assert found["at_peak"] == [{"where": "aisp/kits/gpt.py:40:forward", "bytes": 128, "count": 2},
                                {"where": "torch/nn/functional.py:7:linear", "bytes": 16, "count": 1},
                                {"where": NO_STACK, "bytes": 8, "count": 1}]


def test_past_eight_places_the_rest_is_one_other_row() -> None:
    trace = [alloc(0x1000 * (i + 1), 10 * (i + 1), {**RUN, "line": i}) for i in range(10)]
    rows = summarize_snapshot({"segments": [], "device_traces": [trace]}, 0, ROOT)["at_peak"]
    assert [r["bytes"] for r in rows] == [100, 90, 80, 70, 60, 50, 40, 30, 10 + 20]
    assert rows[0]["where"] == "ch13/baseline_x.py:9:run" and rows[-1] == {"where": "other", "bytes": 30, "count": 2}


def test_only_the_asked_device_is_summarized() -> None:
    snap = snapshot([], [block(1024)])
    snap["device_traces"].append([alloc(0x1000, 64)])
    assert summarize_snapshot(snap, 1, ROOT)["peak_bytes"] == 64  # device 0's segment left out
    assert format_bytes(512) == "512 B" and format_bytes(3 * 2**20) == "3.0 MiB" and format_bytes(5 * 2**29) == "2.50 GiB"


def test_the_cli_refuses_a_command_and_an_unknown_pair_with_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    command = runner.invoke(app, ["profile", "run", "--tool", "memory", "--output-dir", str(tmp_path / "p"),
                                  "--", "python", "x.py"])
    unknown = runner.invoke(app, ["profile", "run", "--tool", "memory", "-t", "ch01:no_such_pair"])
    for out in (command, unknown):
        assert out.exit_code == 2 and len(out.stderr.strip().splitlines()) == 1, out.output
    assert "-t ch13:memory_profiling" in command.stderr and not (tmp_path / "p").exists()


def test_without_cuda_every_variant_says_it_needs_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr("aisp.cli.profile.console", Console(width=200))
    out = CliRunner().invoke(app, ["profile", "run", "-t", "ch01:batch_size", "--tool", "memory",
                                   "--output-dir", str(tmp_path / "p")])
    assert out.exit_code == 0, out.output
    assert "Traceback" not in out.output and f"baseline: skipped: {NEEDS_CUDA}\n" in out.output
    saved = json.loads((tmp_path / "p" / "profile_memory.json").read_text())
    assert saved["variants"] == {name: {"skipped": NEEDS_CUDA} for name in variant_names("ch01:batch_size")}


def test_the_cli_prints_what_is_live_at_the_peak(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorder stubbed with a hand-made snapshot's summary: the table's title and rows."""
    trace = [alloc(0x1000, 3 * 2**20, MODEL), alloc(0x1000 + 3 * 2**20, 2**20, RUN)]
    blocks = [block(3 * 2**20), block(2**20), block(2**20, "active_allocated", SETUP)]
    found = summarize_snapshot(snapshot(trace, blocks), 0, ROOT)
    monkeypatch.setattr("aisp.profile.pair.record_memory", lambda files, *_: {name: found for name in files})
    monkeypatch.setattr("aisp.cli.profile.console", Console(width=200))
    out = CliRunner().invoke(app, ["profile", "run", "-t", "ch01:batch_size", "--tool", "memory",
                                   "--output-dir", str(tmp_path / "p")])
    assert out.exit_code == 0, out.output
    assert "baseline: live at the peak 5.0 MiB (1.0 MiB at the start)" in out.output
    assert "aisp/kits/gpt.py:40:forward" in out.output and "60.0%" in out.output
    assert "each rank" not in out.output  # one rank: no line of every rank's peak


@pytest.mark.gpu
def test_a_pairs_peak_holds_at_least_what_its_tensors_hold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ch13:memory_profiling on a GPU: each variant's peak is at least the bytes its set-up tensors
    (the model, its gradients, the token batches) hold after the recorded call; the rows at the peak
    add up to it; the state live at the start names the repository's lines (setup ran with stacks
    kept); the pickle loads."""
    held: dict[str, int] = {}
    record_one = memory._record_one

    def record_and_weigh(name: str, bench: Any, *args: Any) -> dict[str, Any]:
        found = record_one(name, bench, *args)
        held[name] = held_bytes(bench, "cuda")
        return found

    monkeypatch.setattr(memory, "_record_one", record_and_weigh)
    result = profile_target(ProfileRequest("ch13:memory_profiling", "memory", tmp_path, iterations=1, warmup=1))
    assert set(result["variants"]) == {"baseline", "optimized"}
    for name, found in result["variants"].items():
        assert found["peak_bytes"] >= held[name] > 0, name
        assert found["start_bytes"] <= found["peak_bytes"]
        assert sum(row["bytes"] for row in found["at_peak"]) == found["peak_bytes"]
        assert any(row["where"].startswith(("aisp/", "ch13/")) for row in found["at_start"]), found["at_start"]
        assert pickle.loads(Path(found["files"]["memory_snapshot"]).read_bytes())["device_traces"]
