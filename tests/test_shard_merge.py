"""--shard and ``aisp report merge`` on a CPU: the partition is deterministic and complete, shards
of a real run merge into one run folder (each shard's host listed, the summary written again, the
worst verdict's exit code), and what cannot be one run is refused with one line (exit 2). Also the
hints that balance shards, and ``aisp report phases``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURE_PAIRS
from typer.testing import CliRunner

from aisp import suite
from aisp.cli.main import app
from aisp.harness.discovery import pairs_in, resolve_targets
from aisp.harness.scheduler import DEFAULT_SECONDS, Hint
from aisp.report.phases import by_group

runner = CliRunner()
TARGETS = ["pairs:raises", "pairs:needs_gpu", "pairs:nan_output", "pairs:wrong_shape", "pairs:unavailable"]


def one_line_error(result, code: int, *words: str) -> None:
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.output, result.stderr
    assert all(w in lines[0] for w in words), lines[0]


def fake_run(folder: Path, host: str, shard: str | None, results: list[dict], key: str = "cpu") -> Path:
    """A run folder as a shard leaves it: manifest, summary, each pair's folder."""
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"hardware_key": key, "hostname": host,
                                                      "config": {"shard": shard}, "schedule": {"host": host}}))
    (folder / "summary.json").write_text(json.dumps({"run_id": folder.name, "hardware_key": key, "results": results}))
    for r in results:
        (folder / f"{r['group']}_{r['name']}" / "results").mkdir(parents=True)
        (folder / f"{r['group']}_{r['name']}" / "results" / "benchmark_test_results.json").write_text(json.dumps(r))
    return folder


def result(name: str, verdict: str = "ok", **extra) -> dict:
    return {"target": f"ch01:{name}", "group": "ch01", "name": name, "verdict": verdict, "reason": None,
            "workload": {}, "baseline": None, "variants": [], "best": None, "speedup": None, **extra}


def test_shards_of_a_real_run_merge_into_one(tmp_path: Path):
    shared = tmp_path / "shared"
    for i in range(2):
        out = runner.invoke(app, ["bench", "verify", "--root", str(FIXTURE_PAIRS), *sum((["-t", t] for t in TARGETS), []),
                                  "--shard", f"{i}/2", "--artifacts-dir", str(shared / f"shard{i}")])
        assert out.exit_code in (0, 4, 5), out.output
    shard_dirs = [next((shared / f"shard{i}").iterdir()) for i in range(2)]
    parts = [{r["target"] for r in json.loads((d / "summary.json").read_text())["results"]} for d in shard_dirs]
    assert parts[0] and parts[1] and not parts[0] & parts[1] and parts[0] | parts[1] == set(TARGETS)
    merged = tmp_path / "merged"
    out = runner.invoke(app, ["report", "merge", *map(str, shard_dirs), "-o", str(merged)])
    assert out.exit_code == 5, out.output  # pairs:raises is an error
    summary = json.loads((merged / "summary.json").read_text())
    assert sorted(r["target"] for r in summary["results"]) == sorted(TARGETS)
    manifest = json.loads((merged / "manifest.json").read_text())
    assert [s["shard"] for s in manifest["shards"]] == ["0/2", "1/2"] and manifest["missing_shards"] == []
    assert manifest["hosts"] and manifest["config"]["shard"] is None
    assert "pairs:wrong_shape" in (merged / "summary.md").read_text()
    assert (merged / "pairs_wrong_shape" / "results" / "benchmark_test_results.json").exists()


def test_partition_is_the_same_whatever_the_order_and_covers_every_pair():
    pairs = resolve_targets(TARGETS, FIXTURE_PAIRS, (FIXTURE_PAIRS,))
    hints = {p.slug: Hint(1, 10.0 * (i + 1)) for i, p in enumerate(pairs)}
    shards = [suite.shard_of(pairs, hints, f"{i}/3") for i in range(3)]
    again = [suite.shard_of(list(reversed(pairs)), hints, f"{i}/3") for i in range(3)]
    assert [{p.slug for p in s} for s in shards] == [{p.slug for p in s} for s in again]
    assert sorted(p.slug for s in shards for p in s) == sorted(p.slug for p in pairs)


def test_identical_duplicates_are_kept_once(tmp_path: Path):
    a = fake_run(tmp_path / "a", "node1", "0/2", [result("x"), result("y")])
    b = fake_run(tmp_path / "b", "node2", "1/2", [result("y"), result("z", "slower")])
    out = runner.invoke(app, ["report", "merge", str(a), str(b), "-o", str(tmp_path / "m")])
    assert out.exit_code == 1, out.output  # z is slower
    summary = json.loads((tmp_path / "m" / "summary.json").read_text())
    assert [r["name"] for r in summary["results"]] == ["x", "y", "z"]
    assert json.loads((tmp_path / "m" / "manifest.json").read_text())["hosts"] == ["node1", "node2"]


def test_conflicting_duplicates_are_an_error(tmp_path: Path):
    a = fake_run(tmp_path / "a", "node1", "0/2", [result("x")])
    b = fake_run(tmp_path / "b", "node2", "1/2", [result("x", "error")])
    one_line_error(runner.invoke(app, ["report", "merge", str(a), str(b), "-o", str(tmp_path / "m")]), 2,
                   "ch01:x", "different results")


def test_different_hardware_is_not_one_run(tmp_path: Path):
    a = fake_run(tmp_path / "a", "node1", "0/2", [result("x")], key="h200")
    b = fake_run(tmp_path / "b", "node2", "1/2", [result("y")], key="h100")
    one_line_error(runner.invoke(app, ["report", "merge", str(a), str(b), "-o", str(tmp_path / "m")]), 2,
                   "h100", "h200")


def test_a_missing_shard_fails_the_merge_and_is_named(tmp_path: Path):
    a = fake_run(tmp_path / "a", "node1", "0/3", [result("x")])
    b = fake_run(tmp_path / "b", "node3", "2/3", [result("y")])
    out = runner.invoke(app, ["report", "merge", str(a), str(b), "-o", str(tmp_path / "m")])
    assert out.exit_code == 5 and "shards missing: 1/3" in out.stderr
    assert json.loads((tmp_path / "m" / "manifest.json").read_text())["missing_shards"] == ["1/3"]


def test_merge_refuses_a_non_empty_output_and_a_non_run_folder(tmp_path: Path):
    a = fake_run(tmp_path / "a", "node1", None, [result("x")])
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "keep.txt").write_text("")
    one_line_error(runner.invoke(app, ["report", "merge", str(a), "-o", str(tmp_path / "m")]), 2, "not empty")
    (tmp_path / "empty").mkdir()
    one_line_error(runner.invoke(app, ["report", "merge", str(tmp_path / "empty"), "-o", str(tmp_path / "n")]), 2,
                   "not a finished run folder")


def test_bad_shard_and_missing_gpus_are_usage_errors(monkeypatch):
    monkeypatch.setattr(suite, "run_suite", lambda *a, **k: pytest.fail("a pair ran"))
    one_line_error(runner.invoke(app, ["bench", "run", "-t", "ch01", "--shard", "2/2"]), 2, "--shard")
    one_line_error(runner.invoke(app, ["bench", "verify", "-t", "ch01", "--gpus", "0,0"]), 2, "--gpus")
    one_line_error(runner.invoke(app, ["bench", "run", "-t", "ch01", "--gpus", "64"]), 2, "--gpus 64", "visible")


def test_gpus_and_shard_reach_the_core(monkeypatch):
    seen = {}
    monkeypatch.setattr(suite, "run", lambda targets, roots, options, reporter=None, ci=None: seen.setdefault("o", options) and 0)
    assert runner.invoke(app, ["bench", "run", "-t", "ch01", "--gpus", "0,2,3", "--shard", "1/4"]).exit_code == 0
    assert (seen["o"].gpus, seen["o"].shard) == ("0,2,3", "1/4")


def test_hints_come_from_the_expectation_files(tmp_path: Path):
    folder = tmp_path / "ch99"
    shutil.copytree(FIXTURE_PAIRS, folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "expectations_2x_h200.json").write_text(json.dumps({"entries": {"good": {"seconds": 42.5}}}))
    (folder / "expectations_h200.json").write_text(json.dumps({"entries": {"good": {"seconds": 30.0}, "raises": {}}}))
    (folder / "expectations_h100.json").write_text("{not json")
    hints = suite.pair_hints([p for p in pairs_in(folder) if p.name in ("good", "raises", "constant")])
    assert hints == {"ch99_good": Hint(2, 42.5), "ch99_raises": Hint(1, DEFAULT_SECONDS),
                     "ch99_constant": Hint(1, DEFAULT_SECONDS)}


def test_a_stored_host_link_marks_the_pair_for_the_scheduler(tmp_path: Path):
    """Any file's entry naming a host link marks the pair; hbm, None or no link at all leave it unmarked."""
    folder = tmp_path / "ch99"
    shutil.copytree(FIXTURE_PAIRS, folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "expectations_h200.json").write_text(json.dumps({"entries": {
        "good": {"link": None}, "raises": {"link": "hbm"}, "constant": {}}}))
    (folder / "expectations_2x_h200.json").write_text(json.dumps({"entries": {"good": {"link": "h2d"}}}))
    hints = suite.pair_hints([p for p in pairs_in(folder) if p.name in ("good", "raises", "constant")])
    assert {slug: h.host_link for slug, h in hints.items()} == {"ch99_good": True, "ch99_raises": False,
                                                                 "ch99_constant": False}


def test_phases_by_chapter_sum_pairs_and_give_the_fixed_cost():
    results = [{"target": "ch01:a", "group": "ch01", "phases": {"start": 2.0, "timed": 5.0, "exit": 1.0, "total": 8.0}},
               {"target": "ch01:b", "group": "ch01", "phases": {"start": 4.0, "timed": 1.0, "other": 1.0, "total": 6.0}},
               {"target": "ch02:c", "group": "ch02", "phases": {}}]
    rows = {r["name"]: r for r in by_group(results)}
    assert rows["ch01"]["start"] == 6.0 and rows["ch01"]["total"] == 14.0 and rows["ch01"]["fixed_per_pair"] == 4.0
    assert rows["ch02"]["no_phases"] == 1 and rows["ch02"]["fixed_per_pair"] is None
    assert rows["all"]["pairs"] == 3 and rows["all"]["fixed_per_pair"] == 4.0


def test_the_phases_table_fits_a_narrow_console_by_leaving_phases_out():
    """At 80 columns the fourteen columns were cut to "ch…" and "0…": the least telling phases go
    first, and the name, the total and the fixed cost stay whole; at 200 columns every phase shows."""
    from rich.console import Console

    from aisp.report.phases import table

    phases = {p: 1.25 for p in ("start", "import", "setup", "verify", "warmup", "timed", "memory", "teardown",
                                "other", "exit")}
    rows = by_group([{"target": "ch13:long_context_attention", "group": "ch13", "phases": {**phases, "total": 12.5}}],
                    per_pair=True)
    for width, shown, left_out in ((80, ("total", "fixed s/pair", "timed", "start"), ("teardown", "exit")),
                                   (200, ("teardown", "exit", "import", "total"), ())):
        console = Console(width=width, record=True)
        console.print(table(rows, "pair", "Phases", width))
        text = console.export_text()
        assert "ch13:long_context_attention" in text and "…" not in text, text
        assert all(h in text for h in shown) and not any(h in text for h in left_out), text
        assert max(len(line) for line in text.splitlines()) <= width


def test_report_phases_prints_the_breakdown(tmp_path: Path):
    run = fake_run(tmp_path / "r", "node1", None, [result("x", phases={"start": 1.5, "setup": 2.0, "total": 3.5})])
    out = runner.invoke(app, ["report", "phases", str(run), "-o", str(tmp_path / "p.md")])
    assert out.exit_code == 0, out.output
    assert "ch01" in out.output and "1.50" in out.output
    assert "| ch01 | 1 | 1.5 | 2.0 | 3.5 | 1.50 |" in (tmp_path / "p.md").read_text()
    one_line_error(runner.invoke(app, ["report", "phases", str(tmp_path)]), 2, "summary.json")


def test_expectations_record_the_seconds_that_hints_read(tmp_path: Path):
    from aisp.judge.expectations import entry_from

    timed = {"median": 2.0, "cv": 0.01}
    measured = {**result("good"), "baseline": {"name": "b", "summary": timed, "memory": {}},
                "variants": [{"name": "o", "summary": timed, "memory": {}}], "best": "o",
                "speedup": {"value": 1.0, "low": 0.9, "high": 1.1}, "phases": {"start": 3.0, "total": 12.5}}
    entry = entry_from(measured, {"hardware_key": "cpu", "gpu_name": None})
    folder = tmp_path / "ch99"
    shutil.copytree(FIXTURE_PAIRS, folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "expectations_cpu.json").write_text(json.dumps({"entries": {"good": entry}}))
    (good,) = [p for p in pairs_in(folder) if p.name == "good"]
    assert suite.pair_hints([good]) == {"ch99_good": Hint(1, 12.5)}
