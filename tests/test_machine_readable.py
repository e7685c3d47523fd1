"""Machine-readable results: the tidy CSV types as numbers in pandas, JUnit XML a JUnit parser
reads, the Markdown step summary, and ``aisp bench run`` writing all three."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from conftest import FIXTURE_PAIRS
from synthetic_runs import pair, samples, variant
from typer.testing import CliRunner

from aisp.cli.main import app
from aisp.report import tidy
from aisp.report.junit import junit_xml, outcome
from aisp.report.step_summary import CiOutputs, markdown

RUN = {"run_id": "r1", "hardware_key": "cpu", "gpu_name": None, "git_commit": "abc123"}


def _results() -> list[dict]:
    fast = pair("ch01:fast", variant("baseline_fast", samples(10, 0.02)),
                [variant("optimized_fast", samples(5, 0.02, seed=1)),
                 variant("optimized_fast_alt", samples(8, 0.02, seed=2))])
    fast["variants"][1]["roofline"] = {"pct_of_bound": 41.5}
    slow = pair("ch02:slow", variant("baseline_slow", samples(5, 0.02)),
                [variant("optimized_slow", samples(10, 0.02, seed=3), verdict="slower")],
                verdict="slower", reason='optimized_slow: 2x slower, "really"')
    skipped = pair("ch03:needs_gpu", None, [], verdict="skipped", reason="needs CUDA, a GPU")
    return [fast, slow, skipped]


def test_tidy_csv_loads_into_pandas_with_numeric_columns(tmp_path):
    pd = pytest.importorskip("pandas")
    path = tidy.write_tidy(tmp_path, _results(), RUN)
    frame = pd.read_csv(path)
    assert len(frame) == 3 + 2 + 1  # a row per pair x variant, one for the pair without variants
    for column in tidy.NUMBER_COLUMNS:
        assert pd.api.types.is_numeric_dtype(frame[column]), (column, frame[column].dtype)
    assert frame["is_best"].dtype == bool
    fast = frame[frame["pair"] == "fast"].set_index("variant")
    assert fast.loc["optimized_fast", "is_best"] and not fast.loc["optimized_fast_alt", "is_best"]
    assert fast.loc["optimized_fast", "speedup_low"] < fast.loc["optimized_fast", "speedup"]
    assert fast.loc["optimized_fast_alt", "pct_of_roofline"] == 41.5
    assert math.isnan(fast.loc["baseline_fast", "speedup"])  # a baseline has no speedup: empty, not "-"
    gone = frame[frame["pair"] == "needs_gpu"].iloc[0]
    assert gone["pair_verdict"] == "skipped" and gone["pair_reason"] == "needs CUDA, a GPU"
    assert math.isnan(gone["median_ms"])
    assert frame.loc[frame["pair"] == "slow", "pair_reason"].iloc[0] == 'optimized_slow: 2x slower, "really"'


def test_non_finite_numbers_are_empty_cells():
    bad = pair("ch01:x", variant("baseline_x", samples(1, 0.01)), [variant("optimized_x", samples(1, 0.01))])
    bad["variants"][0]["speedup"] = {"value": "inf", "low": float("nan"), "high": True}
    row = tidy.pair_rows(bad, RUN)[1]
    assert (row["speedup"], row["speedup_low"], row["speedup_high"]) == (None, None, None)


def test_junit_outcomes_follow_the_exit_code_of_each_verdict():
    assert [outcome(v) for v in ("ok", "skipped", "slower", "regressed", "verify-failed", "error", "timeout")] == \
        ["passed", "skipped", "failure", "failure", "failure", "error", "error"]
    assert outcome("a-verdict-added-later") == "passed"


def test_junit_xml_is_read_by_a_junit_parser(tmp_path):
    junitparser = pytest.importorskip("junitparser")
    results = _results() + [pair("ch04:broken", None, [], verdict="error", reason="ImportError: no module x")]
    path = tmp_path / "junit.xml"
    path.write_text(junit_xml(results, "r1"))
    suite = next(iter(junitparser.JUnitXml.fromfile(str(path))))
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (4, 1, 1, 1)
    cases = {case.name: case for case in suite}
    assert cases["fast"].is_passed and cases["fast"].classname == "ch01"
    slow = cases["slow"].result[0]
    assert isinstance(slow, junitparser.Failure) and slow.type == "slower" and "2x slower" in slow.message
    assert isinstance(cases["needs_gpu"].result[0], junitparser.Skipped)
    assert isinstance(cases["broken"].result[0], junitparser.Error)
    props = {p.get("name"): p.get("value") for p in cases["fast"]._elem.iter("property")}
    assert props["verdict"] == "ok" and float(props["speedup"]) > 1


def test_step_summary_counts_verdicts_and_cuts_long_reasons():
    results = _results()
    results[1]["reason"] = "x" * 500
    text = markdown(results, "r1", "cpu")
    assert "1 ok, 1 skipped, 1 slower" in text
    assert re.search(r"\| ch01:fast \| \d\.\d\dx \[\d\.\d\d, \d\.\d\d\] \| ok \|", text)
    assert "x" * 159 + "…" in text and "x" * 161 not in text


def test_step_summary_goes_to_github_unless_a_path_is_given(tmp_path):
    github = tmp_path / "github_summary.md"
    assert CiOutputs.from_cli(None, None, {"GITHUB_STEP_SUMMARY": str(github)}).append_summary == github
    explicit = CiOutputs.from_cli(None, tmp_path / "s.md", {"GITHUB_STEP_SUMMARY": str(github)})
    assert (explicit.step_summary, explicit.append_summary) == (tmp_path / "s.md", None)
    assert CiOutputs.from_cli(None, None, {}) == CiOutputs()
    github.write_text("earlier step\n")
    CiOutputs(append_summary=github).write(_results(), "r1", "cpu")
    assert github.read_text().startswith("earlier step\n### aisp run r1 (cpu)")


def test_bench_run_writes_tidy_csv_junit_and_summary(tmp_path, monkeypatch):
    pd = pytest.importorskip("pandas")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    junit, summary = tmp_path / "ci" / "junit.xml", tmp_path / "ci" / "summary.md"
    result = CliRunner().invoke(app, [
        "bench", "run", "--root", str(FIXTURE_PAIRS), "-t", "pairs:good", "-t", "pairs:wrong_shape",
        "--artifacts-dir", str(tmp_path / "art"), "--iterations", "3", "--warmup", "1", "--warmup-s", "0",
        "--junit-xml", str(junit), "--step-summary", str(summary)])
    assert result.exit_code == 4, result.output
    run_dir = next((tmp_path / "art").iterdir())
    frame = pd.read_csv(run_dir / tidy.TIDY_CSV)
    assert set(frame["target"]) == {"pairs:good", "pairs:wrong_shape"}
    assert pd.api.types.is_numeric_dtype(frame["median_ms"])
    assert '<failure message="verify-failed' in junit.read_text()
    assert "| pairs:wrong_shape |" in summary.read_text()
    assert Path(run_dir / "manifest.json").exists()
