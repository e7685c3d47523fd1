"""A bare ``aisp bench run`` shows its plan and asks (or refuses off a terminal); progress lines per
pair off a terminal; ``list-targets`` with counts, a runs-here column and JSON; tables fit the width."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from conftest import FIXTURE_PAIRS, REPO
from rich.console import Console
from typer.testing import CliRunner

from aisp import suite
from aisp.cli import bench
from aisp.cli.main import app
from aisp.harness.discovery import Pair, resolve_targets
from aisp.report.console import Column, RichReporter, fitted_columns, progress_line, results_table

runner = CliRunner(env={"COLUMNS": "120"})


@pytest.fixture
def no_run(monkeypatch):
    """suite.run recorded, never run."""
    seen: list = []
    monkeypatch.setattr(suite, "run", lambda targets, roots, options, reporter=None, ci=None: seen.append(targets) or 0)
    return seen


def test_bare_run_off_a_terminal_is_a_usage_error(no_run):
    result = runner.invoke(app, ["bench", "run"])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: no --targets") and "--yes" in lines[0]
    assert no_run == []


def test_bare_run_with_yes_runs_every_pair(no_run):
    assert runner.invoke(app, ["bench", "run", "--yes"]).exit_code == 0
    assert no_run == [[]]


def test_bare_run_on_a_terminal_shows_the_plan_and_asks(no_run, monkeypatch):
    monkeypatch.setattr(bench, "is_terminal", lambda: True)
    declined = runner.invoke(app, ["bench", "run"], input="n\n")
    assert declined.exit_code == 0 and no_run == []
    pairs = resolve_targets([], REPO)
    chapters = {p.group for p in pairs}
    assert f"Plan: {len(pairs)} pairs in {len(chapters)} chapters, about " in declined.output
    assert f"Run all {len(pairs)} pairs?" in declined.output and "Nothing run." in declined.output
    accepted = runner.invoke(app, ["bench", "run"], input="y\n")
    assert accepted.exit_code == 0 and no_run == [[]]


def _pair(group: str, name: str) -> Pair:
    folder = Path("/x") / group
    return Pair(group, name, folder, folder / f"baseline_{name}.py", (folder / f"optimized_{name}.py",))


def test_plan_estimates_from_stored_durations():
    pairs = [_pair("ch01", "a"), _pair("ch01", "b"), _pair("ch02", "c")]
    seconds = {pairs[0].slug: 600.0, pairs[1].slug: 1200.0}
    text = bench.plan_text(pairs, seconds, default_s=60.0)
    assert text.splitlines()[0] == ("Plan: 3 pairs in 2 chapters, about 31 min "
                                    "(1 pairs without a stored duration counted at 60 s each)")
    assert text.splitlines()[1].strip() == "ch01 2, ch02 1"
    assert "about 16 min on 2 GPUs at once" in bench.plan_text(pairs, seconds, 60.0, parallel=2)


def test_plan_reads_durations_from_expectation_files(tmp_path):
    """The estimate sums the seconds the expectation files recorded (pair_hints)."""
    mine = tmp_path / "mine"
    mine.mkdir()
    for name in ("a", "b"):
        (mine / f"baseline_{name}.py").write_text("")
        (mine / f"optimized_{name}.py").write_text("")
    (mine / "expectations_cpu.json").write_text(json.dumps({"entries": {"a": {"seconds": 300.0}}}))
    pairs = resolve_targets([], REPO, (mine,))
    hints = suite.pair_hints(pairs)
    from aisp.harness.scheduler import DEFAULT_SECONDS

    assert {p.name: hints[p.slug].seconds for p in pairs} == {"a": 300.0, "b": DEFAULT_SECONDS}


def test_progress_line():
    result = {"target": "ch05:packed_shards", "verdict": "ok",
              "speedup": {"value": 1.523, "low": 1.471, "high": 1.564}}
    assert progress_line(result, 12, 160, 3.14) == "[ 12/160] ch05:packed_shards ok 1.52x [1.47, 1.56] 3.1 s"
    failed = {"target": "ch06:x", "verdict": "verify-failed", "reason": "max error 3.2 > 1e-3\nmore"}
    assert progress_line(failed, 3, 9, None) == "[3/9] ch06:x verify-failed max error 3.2 > 1e-3"


def test_reporter_off_a_terminal_prints_one_line_per_pair(tmp_path):
    pairs = resolve_targets(["pairs:good", "pairs:raises"], REPO, (FIXTURE_PAIRS,))
    out = StringIO()
    reporter = RichReporter(Console(file=out, width=120), lines=True)
    reporter.start(pairs)
    for pair, verdict in zip(pairs, ("ok", "error"), strict=True):
        reporter.pair_started(pair)
        reporter.pair_done({"target": pair.target, "verdict": verdict, "phases": {"total": 2.0},
                            "speedup": {"value": 2.0, "low": 1.9, "high": 2.1} if verdict == "ok" else None,
                            "reason": "boom" if verdict == "error" else None})
    assert reporter.live is None
    assert out.getvalue().splitlines() == ["Running 2 pairs", "[1/2] pairs:good ok 2.00x [1.90, 2.10] 2.0 s",
                                           "[2/2] pairs:raises error boom 2.0 s"]


def test_a_run_off_a_terminal_logs_each_pair(tmp_path):
    result = runner.invoke(app, ["bench", "verify", "--root", str(FIXTURE_PAIRS), "-t", "pairs:good",
                                 "-t", "pairs:wrong_shape", "--artifacts-dir", str(tmp_path)])
    lines = [line for line in result.output.splitlines() if line.startswith("[")]
    assert [line.split()[:3] for line in lines] == [["[1/2]", "pairs:good", "ok"],
                                                   ["[2/2]", "pairs:wrong_shape", "verify-failed"]]


def test_fitted_columns_drop_optional_ones_first():
    columns = [Column("pair"), Column("extra", drop_rank=0), Column("more", drop_rank=1), Column("reason", wraps=True)]
    rows = [["ch05:a_long_pair_name", "x" * 30, "y" * 30, "why"]]
    assert fitted_columns(columns, rows, 200) == [0, 1, 2, 3]
    assert fitted_columns(columns, rows, 90) == [0, 2, 3]
    assert fitted_columns(columns, rows, 40) == [0, 3]


def test_rows_too_wide_for_any_table_are_stacked_with_every_name_whole():
    """A comparison at 80 columns: pair, variant, ratio and status alone exceed the width, so no
    table fits; each row becomes a block (the pair on its line, then header: value pairs)."""
    from aisp.report.console import fitted_table

    columns = [Column("pair"), Column("variant"), Column("time B/A [95% CI]"), Column("status"),
               Column("note", wraps=True)]
    rows = [["ch18:flash_attention_triton (same)", "optimized_flash_attention_triton_cudnn",
             "1.000 [0.950, 1.053] (+0.0%)", "same", "headline 16.09x -> 16.10x"],
            ["", "optimized_flash_attention_triton_sdpa", "1.010 [0.990, 1.030] (+1.0%)", "same", ""]]
    for width in (80, 60):
        out = StringIO()
        Console(file=out, width=width).print(fitted_table(columns, rows, width, title="B vs A"))
        text = out.getvalue()
        assert "…" not in text and max(len(line) for line in text.splitlines()) <= width
        words = text.split()
        for name in ("ch18:flash_attention_triton", "optimized_flash_attention_triton_cudnn",
                     "optimized_flash_attention_triton_sdpa"):
            assert name in words, (name, text)  # whole, never split across lines
        assert "time B/A [95% CI]: 1.000" in " ".join(words) and "note: headline" in text
    wide = StringIO()
    Console(file=wide, width=200).print(fitted_table(columns, rows, 200))
    assert "┃ pair" in wide.getvalue(), "a table where one fits"


def test_results_table_fits_120_columns_without_splitting_names():
    long_name = "ch18:speculative_decoding_with_paged_attention_kernels"
    results = [{"target": long_name, "verdict": "ok", "best": "optimized_speculative_decoding_paged", "reason": "r " * 80,
                "baseline": {"summary": {"median": 12.5}}, "variants": [], "workload": {"headline": "time"},
                "speedup": {"value": 1.5, "low": 1.4, "high": 1.6}}]
    out = StringIO()
    console = Console(file=out, width=120)
    console.print(results_table(results, width=120))
    text = out.getvalue()
    assert long_name in text, "the name is on one line"
    assert max(len(line) for line in text.splitlines()) <= 120
    assert "best" not in text.splitlines()[2], "the least useful column went first"


def test_list_targets_counts_runs_here_and_json():
    shown = runner.invoke(app, ["bench", "list-targets", "--root", str(FIXTURE_PAIRS), "--chapter", "pairs"])
    assert shown.exit_code == 0, shown.output
    listed = runner.invoke(app, ["bench", "list-targets", "--root", str(FIXTURE_PAIRS), "--chapter", "pairs", "--json"])
    data = json.loads(listed.output)
    by_target = {p["target"]: p for p in data["pairs"]}
    assert data["count"] == len(data["pairs"]) == data["chapters"]["pairs"]
    assert by_target["pairs:good"]["runs_here"] is True
    import torch

    if not torch.cuda.is_available():
        assert by_target["pairs:needs_gpu"]["runs_here"] is False
        assert "CUDA" in by_target["pairs:needs_gpu"]["why_not"]
        assert "needs a CUDA GPU" in shown.output
    assert data["runs_here"] == sum(p["runs_here"] for p in data["pairs"])
    assert f"{data['count']} pairs in 1 chapter; {data['runs_here']} run here: pairs {data['count']}" in shown.output


def test_gpus_at_once():
    assert [bench.gpus_at_once(g) for g in ("1", "4", "0,2,3")] == [1, 4, 3]


def test_verification_progress_names_the_pair():
    pairs = resolve_targets(["pairs:good"], REPO, (FIXTURE_PAIRS,))
    reporter = RichReporter(Console(file=StringIO(), width=120), lines=False, verb="verifying")
    reporter.start(pairs)
    reporter.pair_started(pairs[0])
    shown = StringIO()
    Console(file=shown, width=120).print(reporter._view())
    reporter.live.stop()
    assert "verifying pairs:good" in shown.getvalue()


def test_verify_off_a_terminal_says_it_verifies(tmp_path):
    result = runner.invoke(app, ["bench", "verify", "--root", str(FIXTURE_PAIRS), "-t", "pairs:good",
                                 "--artifacts-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == "Verifying 1 pairs"


class FakeTimer:
    """Records the notice instead of starting a thread."""

    made: list[FakeTimer] = []

    def __init__(self, seconds, callback):
        self.seconds, self.callback, self.cancelled, self.daemon = seconds, callback, False, False
        FakeTimer.made.append(self)

    def start(self):
        pass

    def cancel(self):
        self.cancelled = True


def test_a_long_pair_is_named_off_a_terminal():
    from aisp.report.console import STILL_RUNNING_S

    FakeTimer.made = []
    pairs = resolve_targets(["pairs:good", "pairs:raises"], REPO, (FIXTURE_PAIRS,))
    out = StringIO()
    reporter = RichReporter(Console(file=out, width=120), lines=True, verb="verifying", timer=FakeTimer)
    reporter.start(pairs)
    reporter.pair_started(pairs[0])
    reporter.pair_started(pairs[1])
    assert [t.seconds for t in FakeTimer.made] == [STILL_RUNNING_S, STILL_RUNNING_S]
    reporter.pair_done({"target": "pairs:raises", "verdict": "ok"})
    assert FakeTimer.made[1].cancelled and not FakeTimer.made[0].cancelled
    FakeTimer.made[0].callback()  # the first pair's time is up
    FakeTimer.made[1].callback()  # finished already: nothing
    lines = out.getvalue().splitlines()
    assert [line for line in lines if "still" in line] == [lines[-1]]
    assert lines[-1].startswith("  ... still verifying pairs:good (")


def test_a_pair_that_cannot_load_does_not_run_here(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "baseline_needs_pkg.py").write_text("import aisp_no_such_package\n")
    (mine / "optimized_needs_pkg.py").write_text("import aisp_no_such_package\n")
    (mine / "baseline_broken.py").write_text("raise RuntimeError('broken at import')\n")
    (mine / "optimized_broken.py").write_text("")
    listed = runner.invoke(app, ["bench", "list-targets", "--root", str(mine), "--chapter", "mine", "--json"])
    rows = {p["target"]: p for p in json.loads(listed.output)["pairs"]}
    assert rows["mine:needs_pkg"]["why_not"] == "needs the Python package 'aisp_no_such_package', which is not installed"
    assert rows["mine:broken"]["why_not"] == "cannot load baseline_broken.py: RuntimeError: broken at import"
    assert not rows["mine:needs_pkg"]["runs_here"] and not rows["mine:broken"]["runs_here"]


def test_the_step_a_pair_is_in_reaches_the_display(tmp_path):
    """The worker writes each phase it enters to its phase file; the runner passes each new one on."""
    from aisp.harness import runner as runner_mod
    from aisp.harness.options import RunOptions
    from aisp.harness.runner import Reporter, run_suite

    run_suite(resolve_targets(["pairs:good"], REPO, (FIXTURE_PAIRS,)),
              RunOptions(iterations=2, warmup=1, warmup_s=0.0, device="cpu", artifacts_dir=tmp_path), Reporter())
    written = list(tmp_path.rglob("*.phase"))
    assert written and all(path.read_text() == "" for path in written)  # the worker wrote it, and left every phase

    # The runner's side, without racing a real worker: each poll of the process, the worker "moves on".
    files = runner_mod._Files.write({}, tmp_path / "poll", "w")  # the files the runner watches, as it lays them out
    ahead = iter(["setup", "setup", "verify > setup", "timed"])

    class Worker:
        def poll(self):
            step = next(ahead, None)
            if step is None:
                return 0
            files.phase.write_text(step)
            return None

    seen: list[str] = []
    started = runner_mod.time.monotonic()
    assert runner_mod._watch(Worker(), started, runner_mod.Budget(), files, None, seen.append) is None
    assert seen == ["setup", "verify > setup", "timed"]  # each step once, in order

    pairs = resolve_targets(["pairs:good"], REPO, (FIXTURE_PAIRS,))
    FakeTimer.made = []
    out = StringIO()
    lines = RichReporter(Console(file=out, width=120), lines=True, verb="verifying", timer=FakeTimer)
    lines.start(pairs)
    lines.pair_started(pairs[0])
    lines.pair_step(pairs[0], "setup")
    FakeTimer.made[0].callback()
    assert out.getvalue().splitlines()[-1].startswith("  ... still verifying pairs:good (setup, ")


def test_a_worker_announces_where_it_is():
    from aisp.harness.phases import Recorder

    seen: list[str] = []
    recorder = Recorder()
    recorder.listener = seen.append
    with recorder.phase("verify"):
        with recorder.phase("setup"):
            pass
    with recorder.phase("timed"):
        pass
    assert seen == ["verify", "verify > setup", "verify", "", "timed", ""]
