"""``aisp profile run`` on a pair of several ranks: every rank profiled in step through torchrun (two
gloo ranks on the CPU here), rank 0's summary with every rank's figures (torch's windows, memory's
peaks); the tool reaches the ranks' command; tools that would profile a world of one rank refuse; a
failing rank is an error, not a hang; on two GPUs, ch04's pipeline pair's memory on both ranks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from rich.console import Console
from typer.testing import CliRunner

from aisp.cli.main import app
from aisp.cli.profile import _per_rank, _side_by_side
from aisp.harness.artifacts import atomic_write_json
from aisp.profile import ranks
from aisp.profile.memory import NEEDS_CUDA
from aisp.profile.pair import ProfileRequest, _profile_ranks, ranks_needed
from aisp.profile.ranks import RANK_FILE, launch, merge

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "distributed"


def _files(name: str) -> dict[str, Path]:
    return {"baseline": FIXTURES / f"baseline_{name}.py", "optimized": FIXTURES / f"optimized_{name}.py"}


def _summary(window_us: float, kernel_us: float = 0.0) -> dict:
    return {"window_us": window_us, "kernel_us": kernel_us, "gpu_busy_fraction": None, "profiled_iterations": 2}


def test_merge_keeps_rank_0s_summary_and_adds_every_ranks_figures():
    per_rank = [{"baseline": _summary(100.0, 40.0), "optimized": {"skipped": "needs nvcc"}},
                {"baseline": _summary(180.0, 60.0), "optimized": {"skipped": "needs nvcc"}}]
    merged = merge(per_rank, "torch")
    assert merged["optimized"] == {"skipped": "needs nvcc"}
    assert merged["baseline"]["window_us"] == 100.0  # rank 0's
    assert [(r["rank"], r["window_us"], r["kernel_us"]) for r in merged["baseline"]["ranks"]] == [
        (0, 100.0, 40.0), (1, 180.0, 60.0)]
    assert _per_rank(merged["baseline"]) == "r0 0.050 / r1 0.090 ms"


def test_two_ranks_are_profiled_in_step_each_with_its_own_trace(tmp_path):
    assert ranks_needed(FIXTURES / "baseline_slow_rank.py") == (2, None)  # gloo on this CPU: it can run
    found = launch(_files("slow_rank"), 2, tmp_path, iterations=2, warmup=1, timeout_s=240, tool="torch")
    assert set(found) == {"baseline", "optimized"}, found
    for name, summary in found.items():
        assert "error" not in summary, (tmp_path / "ranks.log").read_text()
        assert [r["rank"] for r in summary["ranks"]] == [0, 1]
        assert all(r["window_us"] > 0 for r in summary["ranks"])
        for rank in (0, 1):
            assert (tmp_path / f"rank{rank}" / f"{name}.trace.json").stat().st_size > 0
    table = _side_by_side(found)
    assert "window per iteration, each rank" in table.columns[0]._cells


def test_a_rank_that_raises_makes_every_variant_an_error(tmp_path):
    found = launch(_files("rank_raises"), 2, tmp_path, iterations=1, warmup=1, timeout_s=240, tool="torch")
    assert all("torchrun exited with" in v["error"] for v in found.values()), found
    assert "deliberate failure on rank 1" in (tmp_path / "ranks.log").read_text()


def test_tools_that_would_see_a_world_of_one_rank_refuse(tmp_path):
    files = _files("slow_rank")
    for tool in ("ncu", "nsys", "py-spy"):
        refused = _profile_ranks(ProfileRequest("x:y", tool), files, tmp_path, 2, None)
        assert all("world of one: use --tool torch or --tool memory" in v["skipped"] for v in refused.values())
    unmet = _profile_ranks(ProfileRequest("x:y", "torch"), files, tmp_path, 2, "needs 2 GPUs; 1 present")
    assert unmet == {name: {"skipped": "needs 2 GPUs; 1 present"} for name in files}


MIB = 2**20


def _memory(peak: int, start: int) -> dict[str, Any]:
    """One rank's summary of a variant as ``summarize_snapshot`` gives it, the peak in one row."""
    return {"device": "cuda:0", "peak_bytes": peak, "start_bytes": start, "end_bytes": start, "entries": 12,
            "history_full": False, "at_peak": [{"where": "ch04/ch04_pipeline.py:80:forward", "bytes": peak,
                                                "count": 3}], "at_start": [], "profiled_iterations": 1}


def _fake_torchrun(monkeypatch: pytest.MonkeyPatch, per_rank: list[dict[str, Any]]) -> list[list[str]]:
    """torchrun replaced: each rank's summaries written where that rank writes them; the commands run."""
    commands: list[list[str]] = []

    def run_logged(cmd: list[str], log: Path, timeout_s: float, env: dict[str, str] | None = None) -> int:
        commands.append(cmd)
        out_dir = Path(cmd[cmd.index("aisp.profile.ranks") + 2])
        for rank, found in enumerate(per_rank):
            atomic_write_json(out_dir / f"rank{rank}" / RANK_FILE, {"variants": found})
        return 0

    monkeypatch.setattr(ranks, "run_logged", run_logged)
    return commands


def test_merge_keeps_rank_0s_memory_summary_and_adds_every_ranks_peak():
    per_rank = [{"baseline": _memory(486 * MIB, 268 * MIB), "optimized": {"skipped": NEEDS_CUDA}},
                {"baseline": _memory(300 * MIB, 260 * MIB), "optimized": {"skipped": NEEDS_CUDA}}]
    merged = merge(per_rank, "memory")
    assert merged["optimized"] == {"skipped": NEEDS_CUDA}
    assert merged["baseline"]["peak_bytes"] == 486 * MIB  # rank 0's summary, its rows at the peak
    assert merged["baseline"]["at_peak"] == per_rank[0]["baseline"]["at_peak"]
    assert merged["baseline"]["ranks"] == [{"rank": 0, "peak_bytes": 486 * MIB, "start_bytes": 268 * MIB},
                                           {"rank": 1, "peak_bytes": 300 * MIB, "start_bytes": 260 * MIB}]


def test_memory_runs_on_every_rank_and_the_tool_reaches_the_ranks_command(tmp_path, monkeypatch):
    """--tool memory launches the ranks as --tool torch does, with ``memory`` first in the rank
    module's arguments; each tool's own figures come back under ``ranks``."""
    files = _files("slow_rank")
    memory = [{name: _memory(peak * MIB, MIB) for name in files} for peak in (5, 3)]
    commands = _fake_torchrun(monkeypatch, memory)
    found = _profile_ranks(ProfileRequest("x:y", "memory", iterations=1, warmup=2), files, tmp_path, 2, None)
    assert commands[0][commands[0].index("aisp.profile.ranks") + 1:][:4] == ["memory", str(tmp_path), "1", "2"]
    assert [r["peak_bytes"] for r in found["optimized"]["ranks"]] == [5 * MIB, 3 * MIB]
    traced = [{name: _summary(window) for name in files} for window in (100.0, 180.0)]
    commands = _fake_torchrun(monkeypatch, traced)
    found = _profile_ranks(ProfileRequest("x:y", "torch"), files, tmp_path, 2, None)
    assert commands[0][commands[0].index("aisp.profile.ranks") + 1] == "torch"
    assert [r["window_us"] for r in found["baseline"]["ranks"]] == [100.0, 180.0]
    assert "peak_bytes" not in found["baseline"]["ranks"][0]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the answer of ranks without CUDA")
def test_memory_on_two_cpu_ranks_says_each_variant_needs_cuda(tmp_path):
    """Two gloo ranks run the rank module with ``memory`` for real: each records through
    record_memory, which without CUDA skips every variant with the reason, on every rank."""
    found = launch(_files("slow_rank"), 2, tmp_path, iterations=1, warmup=1, timeout_s=240, tool="memory")
    assert found == {"baseline": {"skipped": NEEDS_CUDA}, "optimized": {"skipped": NEEDS_CUDA}}, found
    assert json.loads((tmp_path / "rank1" / RANK_FILE).read_text())["variants"] == found


def test_the_cli_prints_every_ranks_peak_under_rank_0s_table(tmp_path, monkeypatch):
    merged = merge([{"baseline": _memory(486 * MIB, 268 * MIB)}, {"baseline": _memory(300 * MIB, 260 * MIB)}],
                   "memory")["baseline"]
    monkeypatch.setattr("aisp.profile.pair.ranks_needed", lambda baseline: (2, None))
    monkeypatch.setattr("aisp.profile.pair.launch_ranks", lambda files, *_, tool: {name: merged for name in files})
    monkeypatch.setattr("aisp.cli.profile.console", Console(width=200))
    out = CliRunner().invoke(app, ["profile", "run", "-t", "ch04:pipeline_parallel_multigpu", "--tool", "memory",
                                   "--output-dir", str(tmp_path / "p")])
    assert out.exit_code == 0, out.output
    assert "baseline: live at the peak 486.0 MiB (268.0 MiB at the start)" in out.output  # rank 0's table
    assert ("baseline: peak, each rank: r0 486.0 MiB / r1 300.0 MiB (at the start r0 268.0 MiB / r1 260.0 MiB)"
            in out.output)
    saved = json.loads((tmp_path / "p" / "profile_memory.json").read_text())
    assert saved["variants"]["optimized"]["ranks"][1] == {"rank": 1, "peak_bytes": 300 * MIB, "start_bytes": 260 * MIB}


def test_a_profiled_bench_run_profiles_every_rank_of_a_multi_rank_pair(tmp_path):
    """`aisp bench run --profile minimal` on two gloo ranks: each rank captures every standing variant in
    step after timing; rank 0's capture is the pair's profile, rank 1's sits in profiles/rank1."""
    from dataclasses import replace

    from aisp.harness.discovery import resolve_targets
    from aisp.harness.options import RunOptions
    from aisp.harness.runner import run_suite
    from aisp.harness.scheduler import Hint
    from aisp.suite import hooks_for

    pairs = [p for p in resolve_targets([], FIXTURES, (FIXTURES,)) if p.name == "slow_rank"]
    options = RunOptions(iterations=4, warmup=1, warmup_s=0.0, device="cpu", artifacts_dir=tmp_path,
                         profile="minimal")
    hooks = replace(hooks_for(options), hints={pairs[0].slug: Hint(gpus=2)})
    (result,), run_dir = run_suite(pairs, options, hooks=hooks)
    assert result["verdict"] in ("ok-unchecked", "slower"), result["reason"]
    assert result["telemetry"]["ranks"]["profile"].startswith("every rank profiled in step")
    assert set(result["profile"]["variants"]) == {"baseline_slow_rank", "optimized_slow_rank"}
    rank1 = run_dir / pairs[0].slug / "profiles" / "rank1"
    assert (rank1 / "profile_summary.json").exists()
    assert (rank1 / "optimized_slow_rank.trace.json").stat().st_size > 0


def test_profile_full_leaves_nsight_out_of_a_multi_rank_pair(tmp_path):
    """ncu and nsys run a variant's file as one process, a world of one rank: --profile full says so
    for a multi-rank pair instead of profiling that other program."""
    from aisp.harness.runner import PairContext
    from aisp.profile.pair import attach_profile

    best = {"name": "optimized_x", "file": str(FIXTURES / "optimized_slow_rank.py")}
    result = {"best": "optimized_x", "variants": [best], "workload": {"requires": {"gpus": 1, "ranks": 2}}}
    out = attach_profile(result, PairContext({}, tmp_path), nsight=True)
    assert out["profile"]["nsight"]["ncu"]["skipped"].startswith("runs as 2 ranks")
    assert out["profile"]["nsight"]["nsys"] == out["profile"]["nsight"]["ncu"]
    single = {**result, "workload": {"requires": {"gpus": 1, "ranks": 1}}}
    assert "runs as" not in str(attach_profile(single, PairContext({}, tmp_path), nsight=True)["profile"]["nsight"])


@pytest.mark.gpu
@pytest.mark.multigpu
def test_pipeline_pairs_memory_is_recorded_on_both_gpus(tmp_path, monkeypatch):
    """`aisp profile run -t ch04:pipeline_parallel_multigpu --tool memory` on two GPUs: both ranks
    report a peak for each variant, with a snapshot under ``rank<R>/``, and the CLI prints them; GPipe's
    rank 0 holds more at its peak than 1F1B's (8 micro-batches' activations against 2)."""
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    monkeypatch.setattr("aisp.cli.profile.console", Console(width=200))
    out = CliRunner().invoke(app, ["profile", "run", "-t", "ch04:pipeline_parallel_multigpu", "--tool", "memory",
                                   "--iterations", "1", "--warmup", "1", "--output-dir", str(tmp_path)])
    assert out.exit_code == 0, out.output
    variants = json.loads((tmp_path / "profile_memory.json").read_text())["variants"]
    assert set(variants) == {"baseline", "optimized"}
    for name, found in variants.items():
        assert [r["rank"] for r in found.get("ranks", [])] == [0, 1], found
        assert all(r["peak_bytes"] > 0 for r in found["ranks"]), found["ranks"]
        for rank in (0, 1):
            assert (tmp_path / f"rank{rank}" / f"{name}.memory.pickle").stat().st_size > 0
        assert f"{name}: peak, each rank: r0 " in out.output
    assert variants["baseline"]["peak_bytes"] > variants["optimized"]["peak_bytes"], out.output
