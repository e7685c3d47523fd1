"""``aisp bench run --resume RUN_DIR``: a run cut short by its suite timeout continues in its own
folder, running only the pairs without a final result; one summary of every pair; the selection,
the options that change what a pair measures and the commit must be the run's.

The suite's time limit is driven by a fake clock (the runner's ``time`` replaced): it jumps when a
chosen pair's worker reports its first step, so which pairs finish, which is stopped midway and
which never start does not depend on this host's speed."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import FIXTURE_PAIRS
from test_cli_bench import assert_usage_error
from typer.testing import CliRunner

from aisp import suite
from aisp.cli.main import app
from aisp.harness import runner
from aisp.harness.options import RunOptions
from aisp.harness.results import EXIT_CODES
from aisp.harness.resume import INTERRUPTED, LOCK, NOT_STARTED, unfinished
from aisp.harness.runner import Reporter
from aisp.schemas import validator

cli = CliRunner()
PAIRS = {"a_raises": ("Raises", "Raises"), "b_hangs": ("Hangs", "Hangs"), "c_nan": ("Matmul", "NaNOutput")}
"""Run one at a time in this order (by name): an error that ends by itself, a pair that hangs, a
pair that fails verification."""


def mine(tmp_path: Path) -> Path:
    """A folder of the three pairs of :data:`PAIRS`, built from the fixture pairs' classes."""
    folder = tmp_path / "mine"
    folder.mkdir()
    shutil.copy(FIXTURE_PAIRS / "common_pairs.py", folder / "common_pairs.py")
    for name, classes in PAIRS.items():
        for side, cls in zip(("baseline", "optimized"), classes, strict=True):
            (folder / f"{side}_{name}.py").write_text(
                f"from common_pairs import {cls}\n\n\ndef get_benchmark():\n    return {cls}()\n")
    return folder


class JumpAt(Reporter):
    """Moves the runner's clock ``seconds`` ahead when ``target``'s worker reports its first step."""

    def __init__(self, clock: SimpleNamespace, target: str, seconds: float) -> None:
        self.clock, self.target, self.seconds, self.jumped = clock, target, seconds, False

    def pair_step(self, pair, step: str) -> None:
        if pair.target == self.target and not self.jumped:
            self.jumped = True
            self.clock.offset += self.seconds


def fake_clock(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """The runner's clock: this host's monotonic clock plus an offset a test moves."""
    clock = SimpleNamespace(offset=0.0, time=time.time, sleep=time.sleep)
    clock.monotonic = lambda: time.monotonic() + clock.offset
    monkeypatch.setattr(runner, "time", clock)
    return clock


def count_spawns(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The pair folder of every worker started from now on."""
    spawned, real = [], runner.spawn

    def spawn(spec, work_dir, *args, **kwargs):
        spawned.append(work_dir.parent.name)
        return real(spec, work_dir, *args, **kwargs)
    monkeypatch.setattr(runner, "spawn", spawn)
    return spawned


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def test_a_run_stopped_by_its_suite_timeout_resumes_only_its_unfinished_pairs(tmp_path, monkeypatch):
    folder = mine(tmp_path)
    options = RunOptions(iterations=3, warmup=1, warmup_s=0, device="cpu", artifacts_dir=tmp_path / "art",
                         timeout_multiplier=20, suite_timeout=1000, confirm_runs=0)
    spawned = count_spawns(monkeypatch)
    clock = fake_clock(monkeypatch)
    code = suite.run([], (folder,), options, reporter=JumpAt(clock, "mine:b_hangs", 5000))
    (run_dir,) = (tmp_path / "art").iterdir()
    first = {r["name"]: r for r in summary(run_dir)["results"]}
    assert spawned == ["mine_a_raises", "mine_b_hangs"] and code == EXIT_CODES["error"]
    assert first["a_raises"]["verdict"] == "error"
    assert "--suite-timeout" in first["b_hangs"]["reason"] and unfinished(first["b_hangs"]), first["b_hangs"]
    assert first["c_nan"]["reason"] == NOT_STARTED
    kept = (run_dir / "mine_a_raises" / "results" / "benchmark_test_results.json").stat().st_mtime_ns

    spawned.clear()
    clock = fake_clock(monkeypatch)  # the hanging pair now reaches its own limit (80 s), inside the suite's
    code = suite.resume(run_dir, [], (), {}, reporter=JumpAt(clock, "mine:b_hangs", 500))
    assert sorted(spawned) == ["mine_b_hangs", "mine_c_nan"], "the finished error pair is not run again"
    second = summary(run_dir)
    verdicts = {r["name"]: r["verdict"] for r in second["results"]}
    assert verdicts == {"a_raises": "error", "b_hangs": "timeout", "c_nan": "verify-failed"}
    assert [r["name"] for r in second["results"]] == list(PAIRS), "one summary of every pair, in order"
    assert code == max(EXIT_CODES[v] for v in verdicts.values())
    assert "timed out after 80 s" in second["results"][1]["reason"], "its own limit: a final verdict"
    assert (run_dir / "mine_a_raises" / "results" / "benchmark_test_results.json").stat().st_mtime_ns == kept
    assert (run_dir / "stopped" / "before_part2" / "mine_b_hangs" / "logs" / "pair.log").exists(), \
        "the stopped attempt's logs are kept"
    parts = second["parts"]
    assert [(p["part"], p["complete"], p.get("resumed", False)) for p in parts] == [(1, True, False), (2, True, True)]
    assert parts[1]["finished_before"] == 1 and parts[1]["pairs_to_run"] == 2
    assert all(p["git_commit"] == parts[0]["git_commit"] and p["started"] and p["wall_s"] is not None for p in parts)
    assert "mine:c_nan" in (run_dir / "summary.csv").read_text() and "c_nan" in (run_dir / "results.csv").read_text()
    for name in ("summary", "manifest"):
        validator(name).validate(json.loads((run_dir / f"{name}.json").read_text()))

    spawned.clear()
    fake_clock(monkeypatch)
    assert suite.resume(run_dir, [], (), {}, reporter=Reporter()) == code, "a complete run keeps its exit code"
    assert spawned == [] and len(summary(run_dir)["parts"]) == 3


def test_what_the_runner_stops_is_unfinished_and_a_verdict_of_its_own_is_not():
    assert unfinished({"verdict": "timeout", "reason": NOT_STARTED})
    assert unfinished({"verdict": "error", "reason": INTERRUPTED})
    assert not unfinished({"verdict": "timeout", "reason": "timed out after 80 s; killed with every process it started"})
    assert not unfinished({"verdict": "error", "reason": "RuntimeError: deliberate failure in run()"})
    assert not unfinished({"verdict": "ok", "reason": ""})


@pytest.fixture
def cut_short(tmp_path: Path) -> Path:
    """A run of pairs:good that its suite timeout stopped before any pair started (no worker runs)."""
    result = cli.invoke(app, ["bench", "run", "--root", str(FIXTURE_PAIRS), "-t", "pairs:good", "--device", "cpu",
                              "--suite-timeout", "0.001", "--iterations", "3", "--artifacts-dir", str(tmp_path)])
    assert result.exit_code == EXIT_CODES["timeout"], result.output
    (run_dir,) = tmp_path.iterdir()
    return run_dir


def resume(run_dir: Path, *args: str):
    return cli.invoke(app, ["bench", "run", "--resume", str(run_dir), *args])


def test_an_option_that_changes_the_measurement_is_refused(cut_short):
    assert_usage_error(resume(cut_short, "--iterations", "7"), "--iterations 7", "run's 3")
    assert_usage_error(resume(cut_short, "--seed", "1"), "--seed")
    assert_usage_error(resume(cut_short, "--flush-l2"), "--flush-l2")
    assert_usage_error(resume(cut_short, "-t", "pairs:raises"), "selection differs", "pairs:raises")


def test_free_options_and_the_same_selection_are_taken(cut_short):
    result = resume(cut_short, "--iterations", "3", "-t", "pairs:good", "--root", str(FIXTURE_PAIRS), "--gpus", "1",
                    "--suite-timeout", "0.002", "--confirm-runs", "0")
    assert result.exit_code == EXIT_CODES["timeout"], result.output
    part = summary(cut_short)["parts"][1]
    assert part["suite_timeout"] == 0.002 and summary(cut_short)["options"]["confirm_runs"] == 0


@pytest.mark.parametrize("field, value", [("git_commit", "0" * 40), ("git_dirty", "flip")])
def test_another_commit_or_working_tree_is_refused_unless_forced(cut_short, field, value):
    path = cut_short / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest[field] = not manifest[field] if value == "flip" else value
    path.write_text(json.dumps(manifest))
    assert_usage_error(resume(cut_short), "--force-resume", "this checkout is")
    assert len(json.loads(path.read_text())["parts"]) == 1, "a refused part records nothing"
    assert resume(cut_short, "--force-resume").exit_code == EXIT_CODES["timeout"]
    part = summary(cut_short)["parts"][1]
    assert part["forced"] and part[field] != manifest[field], "the part records the checkout it ran"


def test_what_cannot_be_resumed_is_a_usage_error(cut_short, tmp_path):
    assert_usage_error(resume(tmp_path / "nowhere"), "not a run folder")
    assert_usage_error(cli.invoke(app, ["bench", "run", "-t", "ch01", "--force-resume"]), "--resume")
    manifest = json.loads((cut_short / "manifest.json").read_text())
    fd = os.open(cut_short / LOCK, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert_usage_error(resume(cut_short), "in use by another aisp run")
    finally:
        os.close(fd)
    del manifest["selection"]
    (cut_short / "manifest.json").write_text(json.dumps(manifest))
    assert_usage_error(resume(cut_short), "names no selection")


def test_progress_counts_the_pairs_finished_earlier():
    from io import StringIO

    from rich.console import Console

    from aisp.harness.discovery import resolve_targets
    from aisp.report.console import RichReporter

    pairs = resolve_targets(["pairs:good"], FIXTURE_PAIRS, (FIXTURE_PAIRS,))
    out = StringIO()
    reporter = RichReporter(Console(file=out, width=120), lines=True)
    reporter.start(pairs, earlier=3, total=4)
    reporter.pair_done({"target": "pairs:good", "group": "pairs", "name": "good", "verdict": "ok"})
    lines = out.getvalue().splitlines()
    assert lines[0] == "Running 1 pairs (3 of the run's 4 finished earlier)"
    assert lines[1].startswith("[4/4] pairs:good ok")


class StopAfterFirst(Reporter):
    """Ctrl-C as the first pair's result is written (raised in the calling thread, as SIGINT is)."""

    def pair_done(self, result) -> None:
        raise KeyboardInterrupt


def test_a_resumed_part_cut_short_loses_nothing_and_resumes_again(tmp_path, monkeypatch):
    options = RunOptions(iterations=3, warmup=1, warmup_s=0, device="cpu", artifacts_dir=tmp_path, suite_timeout=0.001)
    targets = ["pairs:good", "pairs:nan_output", "pairs:raises"]
    suite.run(targets, (FIXTURE_PAIRS,), options, reporter=Reporter())
    (run_dir,) = tmp_path.iterdir()
    spawned = count_spawns(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        suite.resume(run_dir, [], (), {"suite_timeout": 600.0}, reporter=StopAfterFirst())
    assert spawned == ["pairs_good"]
    parts = json.loads((run_dir / "manifest.json").read_text())["parts"]
    assert [p["complete"] for p in parts] == [True, False] and parts[1]["wall_s"] is not None
    spawned.clear()
    assert suite.resume(run_dir, [], (), {"suite_timeout": 600.0}, reporter=Reporter()) == EXIT_CODES["error"]
    assert sorted(spawned) == ["pairs_nan_output", "pairs_raises"], "the pair finished before the cut is kept"
    verdicts = [r["verdict"] for r in summary(run_dir)["results"]]
    assert verdicts[1:] == ["verify-failed", "error"] and verdicts[0] not in ("timeout", "error")
    assert [p["complete"] for p in summary(run_dir)["parts"]] == [True, False, True]
