"""The bench CLI is thin: it passes options to the core and maps verdicts to exit codes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURE_PAIRS, REPO
from typer.testing import CliRunner

from aisp import suite
from aisp.cli.main import app
from aisp.harness import host
from aisp.report.plotting import INSTALL_HINT

runner = CliRunner()
FIXTURE_UNCHECKED = Path(__file__).parent / "fixtures" / "unchecked"


def test_list_targets_shows_chapter_pairs():
    result = runner.invoke(app, ["bench", "list-targets", "--chapter", "ch1"])
    assert result.exit_code == 0
    assert "ch01:batch_size" in result.output


def test_unknown_target_is_usage_error():
    result = runner.invoke(app, ["bench", "run", "-t", "ch01:batch_sise"])
    assert result.exit_code == 2
    assert "ch01:batch_size" in result.output


def test_bad_options_are_usage_errors():
    assert runner.invoke(app, ["bench", "run", "-t", "ch01", "--iterations", "1"]).exit_code == 2
    assert runner.invoke(app, ["bench", "run", "-t", "ch01", "--profile", "loud"]).exit_code == 2
    assert runner.invoke(app, ["bench", "run", "-t", "ch01", "--device", "tpu"]).exit_code == 2
    assert runner.invoke(app, ["bench", "run", "-t", "ch01", "--confirm-runs", "-1"]).exit_code == 2


def test_options_reach_the_core(monkeypatch):
    seen = {}

    def fake_run(targets, roots, options, reporter=None, ci=None):
        seen.update(targets=targets, roots=roots, options=options)
        return 4

    monkeypatch.setattr(suite, "run", fake_run)
    result = runner.invoke(app, ["bench", "run", "-t", "ch1", "-t", "ch03:gemm", "--root", str(FIXTURE_PAIRS),
                                 "--iterations", "7", "--warmup", "2", "--reproducible", "--cold-start",
                                 "--flush-l2", "--timeout-multiplier", "2.5", "--suite-timeout", "60",
                                 "--confirm-runs", "3", "--reuse-workers"])
    assert result.exit_code == 4
    opts = seen["options"]
    assert seen["targets"] == ["ch1", "ch03:gemm"] and seen["roots"] == (Path(FIXTURE_PAIRS),)
    assert (opts.iterations, opts.warmup, opts.reproducible, opts.cold_start, opts.flush_l2) == (7, 2, True, True, True)
    assert (opts.timeout_multiplier, opts.suite_timeout, opts.confirm_runs) == (2.5, 60.0, 3)
    assert opts.reuse_workers


def test_verify_runs_without_timing(tmp_path):
    result = runner.invoke(app, ["bench", "verify", "--root", str(FIXTURE_PAIRS), "-t", "pairs:good",
                                 "-t", "pairs:wrong_shape", "--artifacts-dir", str(tmp_path)])
    assert result.exit_code == 4, result.output
    run_dir = next(tmp_path.iterdir())
    assert "verify-failed" in (run_dir / "summary.csv").read_text()


def test_defaults_come_from_run_options(monkeypatch):
    """No flag given: the CLI, a chapter's compare.py and the standalone runner all use
    RunOptions' own defaults (defined in one place)."""
    import argparse

    from aisp import chapter, standalone
    from aisp.harness.options import RunOptions

    seen = []
    monkeypatch.setattr(suite, "run", lambda targets, roots, options, reporter=None, ci=None: seen.append(options) or 0)
    assert runner.invoke(app, ["bench", "run", "-t", "ch01"]).exit_code == 0
    assert chapter.compare_main(str(Path("ch01") / "compare.py"), []) == 0
    assert seen == [RunOptions(), RunOptions()]
    parsed = {}
    real_parse = argparse.ArgumentParser.parse_known_args
    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args",
                        lambda self, argv=None: parsed.setdefault("args", real_parse(self, argv)))
    monkeypatch.setattr(standalone, "unmet_requirements", lambda *a: "stop here")
    from ch01.baseline_batch_size import get_benchmark
    standalone.run_standalone(get_benchmark, [])
    args = vars(parsed["args"][0])
    defaults = RunOptions()
    assert args == {"iterations": defaults.iterations, "warmup": defaults.warmup, "device": defaults.device,
                    "seed": defaults.seed}


def assert_usage_error(result, *words: str) -> None:
    """Exit 2, one line on stderr naming the problem, no traceback."""
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit) and "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert all(word in lines[0] for word in words), lines[0]


def test_artifacts_dir_naming_a_file_is_usage_error(tmp_path):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("")
    for path in (a_file, a_file / "runs"):
        result = runner.invoke(app, ["bench", "run", "--root", str(FIXTURE_PAIRS), "-t", "pairs:good",
                                     "--artifacts-dir", str(path)])
        assert_usage_error(result, "--artifacts-dir", "notes.txt")


def test_device_cuda_without_a_gpu_is_usage_error(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(suite, "run", lambda *a, **k: pytest.fail("a pair ran"))
    for command in ("run", "verify", "noise"):
        assert_usage_error(runner.invoke(app, ["bench", command, "-t", "ch01", "--device", "cuda"]), "--device cuda")


@pytest.mark.parametrize("value", ["-5", "0"])
def test_suite_timeout_must_be_positive(value):
    assert_usage_error(runner.invoke(app, ["bench", "run", "-t", "ch01", "--suite-timeout", value]), "--suite-timeout")


def test_long_usage_messages_stay_on_one_line():
    assert_usage_error(runner.invoke(app, ["bench", "run", "-t", "ch01:batch_sise"]), "ch01:batch_size")


def test_a_run_with_no_pair_is_usage_error(tmp_path):
    (tmp_path / "notes.py").write_text("")
    assert_usage_error(runner.invoke(app, ["bench", "run", "--root", str(tmp_path)]), "No pair", str(tmp_path))


def test_unpaired_files_are_reported_not_dropped(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    for name in ("baseline_lonely.py", "optimized_orphan_fast.py"):
        (mine / name).write_text("raise SystemExit('never loaded')\n")
    listed = runner.invoke(app, ["bench", "list-targets", "--root", str(mine)])
    assert "mine:lonely" in listed.output and "mine:orphan_fast" in listed.output
    result = runner.invoke(app, ["bench", "run", "--root", str(mine), "--artifacts-dir", str(tmp_path / "runs")])
    assert result.exit_code == 5, result.output
    summary = (next((tmp_path / "runs").iterdir()) / "summary.csv").read_text()
    assert "baseline_lonely.py has no optimized_lonely" in summary
    assert "optimized_orphan_fast.py has no baseline_orphan_fast.py" in summary


WITHOUT_EXTRAS = """import sys
for extra in ("matplotlib", "yaml", "kubernetes_validate", "jsonschema"):
    sys.modules[extra] = None  # as if not installed: importing it raises ImportError
from aisp.cli.main import main
sys.argv[0] = "aisp"
main()
"""


def aisp_without_extras(*args: str) -> subprocess.CompletedProcess:
    """``aisp ARGS`` in a fresh interpreter where no optional extra can be imported."""
    return subprocess.run([sys.executable, "-c", WITHOUT_EXTRAS, *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120, check=False)


def test_cli_works_on_the_core_dependencies_alone(tmp_path):
    assert aisp_without_extras("--help").returncode == 0
    listed = aisp_without_extras("bench", "list-targets", "--chapter", "ch01")
    assert listed.returncode == 0 and "ch01:batch_size" in listed.stdout, listed.stderr
    plot = aisp_without_extras("report", "roofline", str(tmp_path))
    assert plot.returncode == 2 and "Traceback" not in plot.stderr, plot.stderr
    assert plot.stderr.strip().splitlines() == [f"error: {INSTALL_HINT}"]


def test_a_cached_answer_without_inputs_is_ok_unchecked_and_not_stored(tmp_path, monkeypatch):
    """A variant returning ``self.answer.clone()`` computed in setup(), beside a baseline that declares
    no per-call inputs, passed as ``ok`` with exit 0; now it is ``ok-unchecked`` in the console and
    summary.md, and ``--update-expectations`` stores only the pair that states why it has no inputs.
    (The host reads as quiet: on a loaded CI host a busy result would not be stored either; so does
    the run-queue wait of the pair's threads, which fired once under a loaded full suite.)"""
    monkeypatch.setattr(host, "read", lambda gpu_pids=None: host.Reading(0.0, None, None))
    monkeypatch.setattr(host, "STARVED_LIMIT", float("inf"))
    mine = tmp_path / "mine"
    shutil.copytree(FIXTURE_UNCHECKED, mine)
    result = runner.invoke(app, ["bench", "run", "--root", str(mine), "--device", "cpu", "--iterations", "5",
                                 "--warmup", "1", "--warmup-s", "0", "--update-expectations",
                                 "--artifacts-dir", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    rows = {line.split()[1]: line for line in result.output.splitlines() if line.startswith("│ mine:")}
    assert "ok-unchecked" in rows["mine:answer_ahead"] and "ok-unchecked" in rows["mine:by_design"]
    assert "mine:answer_ahead: optimized_answer_ahead: no per-call inputs declared" in result.output
    summary = (next((tmp_path / "runs").iterdir()) / "summary.md").read_text()
    assert summary.count("| ok-unchecked |") == 2 and "- mine:answer_ahead: optimized_answer_ahead: no per-call" in summary
    refused = [line for line in result.output.splitlines() if "not stored in expectations" in line]
    assert len(refused) == 1 and refused[0].startswith("warning: mine:answer_ahead: not stored")
    stored = json.loads((mine / "expectations_cpu.json").read_text())["entries"]
    assert list(stored) == ["by_design"]
