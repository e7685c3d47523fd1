"""``aisp report proof-of-benefit``: newest result per pair, a status each, CSV and Markdown."""

from __future__ import annotations

import csv

import pytest
from synthetic_runs import ENV, pair, samples, variant, write_run
from typer.testing import CliRunner

from aisp.cli.main import app
from aisp.judge.proof import proof_rows, write_report

runner = CliRunner(env={"COLUMNS": "250"})


def timed(target: str, speedup: float, seed: int = 0, verdict: str = "ok") -> dict:
    """A pair whose optimized variant runs ``speedup`` times faster than its baseline."""
    return pair(target, variant("baseline", samples(10.0, 0.005, seed=seed)),
                [variant("optimized", samples(10.0 / speedup, 0.005, seed=seed + 1))], verdict=verdict)


def untimed(target: str, verdict: str, reason: str) -> dict:
    return pair(target, None, [], verdict=verdict, reason=reason)


def memory_pair(target: str, baseline_bytes: int, optimized_bytes: int) -> dict:
    result = pair(target, variant("baseline", samples(10.0, 0.005), memory={"peak_bytes": baseline_bytes}),
                  [variant("optimized", samples(11.0, 0.005), memory={"peak_bytes": optimized_bytes})],
                  headline="memory")
    ratio = baseline_bytes / optimized_bytes
    result["speedup"] = {"value": ratio, "low": ratio, "high": ratio}
    return result


def by_target(rows: list[dict[str, str]]) -> dict[str, dict[str, str]]:
    return {r["target"]: r for r in rows}


def test_every_status(tmp_path):
    write_run(tmp_path, "20250101-000000", [
        timed("ch01:fast", 2.0),
        timed("ch01:meh", 1.01),
        timed("ch01:worse", 1.5, verdict="regressed"),
        untimed("ch01:wrong", "verify-failed", "optimized: max_abs_err 3.0"),
        untimed("ch01:crash", "error", "baseline: RuntimeError"),
        untimed("ch01:hang", "timeout", "timed out after 60 s"),
        untimed("ch01:gpu", "skipped", "needs CUDA"),
        memory_pair("ch01:mem", 4_000_000, 1_000_000),
        memory_pair("ch01:mem_small", 1_020_000, 1_000_000),
    ])
    rows, problems = proof_rows(tmp_path, min_speedup=1.05)
    assert problems == []
    status = {t: r["status"] for t, r in by_target(rows).items()}
    assert status == {"ch01:fast": "ok", "ch01:meh": "needs-work", "ch01:worse": "regressed",
                      "ch01:wrong": "verify-failed", "ch01:crash": "error", "ch01:hang": "error",
                      "ch01:gpu": "skipped", "ch01:mem": "ok", "ch01:mem_small": "needs-work"}
    fast = by_target(rows)["ch01:fast"]
    assert float(fast["speedup"]) == pytest.approx(2.0, rel=0.02)
    assert float(fast["low"]) <= float(fast["speedup"]) <= float(fast["high"])
    assert fast["best"] == "optimized" and fast["headline"] == "time" and fast["run_id"] == "20250101-000000"
    assert by_target(rows)["ch01:mem"]["speedup"] == "4.000"
    assert by_target(rows)["ch01:mem"]["headline"] == "memory"
    assert "below the 1.05x bar" in by_target(rows)["ch01:meh"]["reason"]
    assert by_target(rows)["ch01:gpu"]["reason"] == "needs CUDA"


def test_bar_is_an_option(tmp_path):
    write_run(tmp_path, "20250101-000000", [timed("ch01:a", 1.3)])
    assert proof_rows(tmp_path, 1.2)[0][0]["status"] == "ok"
    assert proof_rows(tmp_path, 1.5)[0][0]["status"] == "needs-work"


def test_newest_run_wins(tmp_path):
    write_run(tmp_path, "20250102-000000-10", [timed("ch01:a", 1.01, seed=3), timed("ch01:b", 2.0)])
    write_run(tmp_path, "20250102-000000-2", [timed("ch01:a", 3.0, seed=2)])
    write_run(tmp_path, "20250101-000000", [timed("ch01:a", 2.0, seed=1), untimed("ch01:old", "error", "x")])
    rows = by_target(proof_rows(tmp_path)[0])
    assert rows["ch01:a"]["run_id"] == "20250102-000000-10"
    assert rows["ch01:a"]["status"] == "needs-work"
    assert rows["ch01:old"]["run_id"] == "20250101-000000"
    assert rows["ch01:b"]["status"] == "ok"


def test_verify_only_pass_does_not_replace_a_timed_result(tmp_path):
    write_run(tmp_path, "20250101-000000", [timed("ch01:a", 2.0), timed("ch01:b", 2.0)])
    write_run(tmp_path, "20250102-000000", [pair("ch01:a", None, []), untimed("ch01:b", "verify-failed", "bad")],
              verify_only=True)
    rows = by_target(proof_rows(tmp_path)[0])
    assert rows["ch01:a"]["status"] == "ok" and rows["ch01:a"]["run_id"] == "20250101-000000"
    assert rows["ch01:b"]["status"] == "verify-failed" and rows["ch01:b"]["run_id"] == "20250102-000000"


def test_hardware_keys_are_reported_apart(tmp_path):
    write_run(tmp_path, "20250101-000000", [timed("ch01:a", 2.0)], env={**ENV, "hardware_key": "h100"})
    write_run(tmp_path, "20250102-000000", [timed("ch01:a", 1.0)])
    rows = proof_rows(tmp_path)[0]
    assert [(r["hardware"], r["status"]) for r in rows] == [("cpu", "inconclusive"), ("h100", "ok")]


def test_a_one_gpu_pair_on_a_two_gpu_host_is_reported_under_its_own_key(tmp_path):
    one_gpu = {**timed("ch13:a", 2.0), "expectation": {"status": "ok", "hardware_key": "h200"}}
    write_run(tmp_path, "20250101-000000", [timed("ch13:a", 1.0)], env={**ENV, "hardware_key": "h200"})
    write_run(tmp_path, "20250102-000000", [one_gpu, timed("ch13:b", 2.0)], env={**ENV, "hardware_key": "2x_h200"})
    rows = proof_rows(tmp_path)[0]
    assert [(r["target"], r["hardware"], r["status"]) for r in rows] == [
        ("ch13:a", "h200", "ok"), ("ch13:b", "2x_h200", "ok")]


def test_unreadable_summary_is_reported_and_skipped(tmp_path):
    write_run(tmp_path, "20250101-000000", [timed("ch01:a", 2.0)])
    (tmp_path / "20250102-000000").mkdir()
    (tmp_path / "20250102-000000" / "summary.json").write_text("{not json")
    rows, problems = proof_rows(tmp_path)
    assert [r["target"] for r in rows] == ["ch01:a"]
    assert len(problems) == 1 and "malformed JSON" in problems[0]


def test_csv_and_markdown_written(tmp_path):
    write_run(tmp_path / "artifacts", "20250101-000000", [timed("ch01:a", 2.0), untimed("ch01:b", "skipped", "no GPU")])
    rows, _ = proof_rows(tmp_path / "artifacts")
    csv_path, md_path = write_report(rows, tmp_path / "reports" / "pob.csv", tmp_path / "artifacts", 1.05)
    assert md_path == tmp_path / "reports" / "pob.md"
    with csv_path.open() as handle:
        read = list(csv.DictReader(handle))
    assert [(r["target"], r["status"]) for r in read] == [("ch01:a", "ok"), ("ch01:b", "skipped")]
    assert list(read[0]) == ["target", "hardware", "status", "speedup", "low", "high", "headline",
                             "baseline_ms", "optimized_ms", "best", "run_id", "reason", "notes"]
    text = md_path.read_text()
    assert "2 pairs: 1 ok, 0 ok-unchecked, 0 inconclusive, 0 needs-work, 0 regressed, 0 verify-failed, 0 error, 1 skipped" in text
    assert "| ch01:b | cpu | skipped |" in text


def test_cli_writes_report(tmp_path):
    artifacts = tmp_path / "artifacts"
    write_run(artifacts, "20250101-000000", [timed("ch01:a", 2.0), timed("ch01:slow", 1.0)])
    out = tmp_path / "reports" / "proof_of_benefit.csv"
    result = runner.invoke(app, ["report", "proof-of-benefit", "--artifacts-dir", str(artifacts),
                                 "--output-csv", str(out), "--min-speedup", "1.1"])
    assert result.exit_code == 0, result.output
    assert "2 pairs: 1 ok, 0 ok-unchecked, 1 inconclusive, 0 needs-work" in result.output
    assert "ch01:slow" in result.output
    assert out.exists() and out.with_suffix(".md").exists()


def test_cli_empty_artifacts_writes_header_only(tmp_path):
    out = tmp_path / "pob.csv"
    result = runner.invoke(app, ["report", "proof-of-benefit", "--artifacts-dir", str(tmp_path),
                                 "--output-csv", str(out)])
    assert result.exit_code == 0
    assert out.read_text().startswith("target,hardware,status,")
    assert "(no pairs)" in out.with_suffix(".md").read_text()


def test_cli_missing_artifacts_dir(tmp_path):
    result = runner.invoke(app, ["report", "proof-of-benefit", "--artifacts-dir", str(tmp_path / "nope"),
                                 "--output-csv", str(tmp_path / "pob.csv")])
    assert result.exit_code == 2
    assert "no such artifacts folder" in result.output
    assert not (tmp_path / "pob.csv").exists()


def test_a_verify_only_run_alone_makes_no_row(tmp_path):
    """A pair only ever verified has no measured speedup to prove: no "needs-work" row for it."""
    write_run(tmp_path, "20250101-000000", [timed("ch01:a", 2.0)])
    write_run(tmp_path, "20250102-000000", [timed("ch01:a", 2.0, seed=3), timed("ch01:never_timed", 2.0)],
              verify_only=True)
    rows = by_target(proof_rows(tmp_path)[0])
    assert list(rows) == ["ch01:a"] and rows["ch01:a"]["run_id"] == "20250101-000000"


def test_a_verify_only_pass_on_a_two_gpu_host_does_not_shadow_the_one_gpu_result(tmp_path):
    """Timed results carry their pair's key (h200); a verify-only run carries only the host's (2x_h200)."""
    one_gpu = {**timed("ch13:a", 2.0), "expectation": {"status": "ok", "hardware_key": "h200"}}
    two_gpu_env = {**ENV, "hardware_key": "2x_h200"}
    write_run(tmp_path, "20250101-000000", [one_gpu], env=two_gpu_env)
    write_run(tmp_path, "20250102-000000", [timed("ch13:a", 2.0)], env=two_gpu_env, verify_only=True)
    assert [(r["hardware"], r["status"]) for r in proof_rows(tmp_path)[0]] == [("h200", "ok")]
    write_run(tmp_path, "20250103-000000", [untimed("ch13:a", "verify-failed", "bad")], env=two_gpu_env,
              verify_only=True)
    assert [(r["hardware"], r["status"]) for r in proof_rows(tmp_path)[0]] == [("h200", "verify-failed")]


def test_console_table_fits_120_columns(tmp_path):
    write_run(tmp_path, "20250101-000000", [timed("ch18:speculative_decoding_with_paged_attention", 2.0),
                                            untimed("ch01:b", "error", "a long reason " * 12)])
    result = CliRunner(env={"COLUMNS": "120"}).invoke(app, ["report", "proof-of-benefit", "--artifacts-dir",
                                                            str(tmp_path), "--output-csv", str(tmp_path / "p.csv")])
    assert result.exit_code == 0, result.output
    table = [line for line in result.output.splitlines() if line.startswith(("│", "┃"))]
    assert "ch18:speculative_decoding_with_paged_attention" in result.output
    assert max(len(line) for line in table) <= 120
    starts = [line.split("│")[1].strip() for line in table[1:]]
    assert [s for s in starts if s] == ["ch01:b", "ch18:speculative_decoding_with_paged_attention"]
    assert "error" in next(line for line in table if "ch01:b" in line), "the status sits on the pair's line"
    assert len(table[0].split("┃")) == len(table[1].split("│")), "one header line: no header wraps"
