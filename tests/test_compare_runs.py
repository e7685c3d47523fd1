"""``aisp bench compare``: faster/slower/same/ambiguous from samples, environment changes, errors."""

from __future__ import annotations

import pytest
from synthetic_runs import ENV, pair, samples, variant, write_run
from typer.testing import CliRunner

from aisp.cli.main import app
from aisp.harness.artifacts import atomic_write_json
from aisp.judge.compare_runs import classify, compare_runs, compare_samples, run_to_run_threshold
from aisp.judge.expectations import pair_fingerprint

runner = CliRunner(env={"COLUMNS": "250"})
BASE_MS = 10.0


def one_pair(run_ms: float, noise: float, seed: int, target: str = "ch01:x") -> dict:
    """A pair whose baseline runs at 2x the optimized time; both scale with ``run_ms``."""
    return pair(target, variant("baseline_x", samples(2 * run_ms, noise, seed=seed)),
                [variant("optimized_x", samples(run_ms, noise, seed=seed + 100))])


@pytest.mark.parametrize(("b_ms", "noise_b", "expected"), [
    (8.0, 0.01, "faster"),
    (12.0, 0.01, "slower"),
    (10.0, 0.002, "same"),
    (10.5, 0.5, "ambiguous"),
])
def test_each_status_from_samples(b_ms, noise_b, expected):
    a = samples(BASE_MS, 0.01, seed=1)
    b = samples(b_ms, noise_b, seed=2)
    outcome = compare_samples(a, b, threshold=0.02)
    assert outcome["status"] == expected
    assert outcome["ratio"]["value"] == pytest.approx(b_ms / BASE_MS, rel=0.15)
    if expected in ("faster", "slower"):
        assert outcome["p_value"] < 0.01


def test_significant_change_below_threshold_is_not_called_faster():
    a = samples(BASE_MS, 0.001, seed=1)
    b = samples(BASE_MS * 0.99, 0.001, seed=2)
    outcome = compare_samples(a, b, threshold=0.02)
    assert outcome["ratio"]["high"] < 1 and outcome["p_value"] < 0.01
    assert outcome["status"] == "same"
    assert compare_samples(a, b, threshold=0.005)["status"] == "faster"


def test_interval_excluding_one_without_significance_is_ambiguous():
    ratio = {"value": 1.2, "low": 1.1, "high": 1.3}
    assert classify(ratio, p_value=0.02, threshold=0.02) == "ambiguous"
    assert classify(ratio, p_value=0.001, threshold=0.02) == "slower"
    assert classify({"value": 1.0, "low": 0.97, "high": 1.01}, 0.5, 0.02) == "ambiguous"


def test_pairs_matched_by_target_and_variant(tmp_path):
    a = write_run(tmp_path, "20250101-000000", [one_pair(5.0, 0.01, 1), one_pair(5.0, 0.01, 3, "ch01:gone")])
    b_pairs = [one_pair(7.0, 0.01, 2), one_pair(5.0, 0.01, 4, "ch02:new")]
    b_pairs[0]["variants"].append(variant("optimized_x_extra", samples(4.0, 0.01, seed=9)))
    b = write_run(tmp_path, "20250102-000000", b_pairs)
    comparison = compare_runs(a, b)
    by_target = {p["target"]: p for p in comparison["pairs"]}
    assert by_target["ch01:gone"]["status"] == "not in run B"
    assert by_target["ch02:new"]["status"] == "not in run A"
    x = by_target["ch01:x"]
    assert x["status"] == "slower"
    assert {r["variant"]: r["status"] for r in x["variants"]} == {
        "baseline_x": "slower", "optimized_x": "slower", "optimized_x_extra": "not in run A"}
    assert comparison["environment_changes"] == []
    assert not any(p["environment_changed"] for p in comparison["pairs"])


def test_variant_without_samples_is_not_compared(tmp_path):
    a = write_run(tmp_path, "a", [one_pair(5.0, 0.01, 1)])
    skipped = pair("ch01:x", variant("baseline_x", samples(10.0, 0.01, seed=2)),
                   [variant("optimized_x", None, verdict="verify-failed")], verdict="verify-failed")
    b = write_run(tmp_path, "b", [skipped])
    rows = {r["variant"]: r for r in compare_runs(a, b)["pairs"][0]["variants"]}
    assert rows["optimized_x"]["status"] == "not-compared"
    assert "verify-failed" in rows["optimized_x"]["reason"]
    assert rows["baseline_x"]["status"] == "same"
    assert compare_runs(a, b)["pairs"][0]["status"] == "not-compared", "no optimized variant was compared"
    only_failed = write_run(tmp_path, "c", [pair("ch01:x", variant("baseline_x", None, verdict="error"), [],
                                                 verdict="error")])
    assert compare_runs(a, only_failed)["pairs"][0]["status"] == "not-compared"


def test_environment_change_flags_every_row(tmp_path):
    a = write_run(tmp_path, "a", [one_pair(5.0, 0.01, 1), one_pair(5.0, 0.01, 3, "ch01:y")])
    b = write_run(tmp_path, "b", [one_pair(5.0, 0.01, 2), one_pair(5.0, 0.01, 4, "ch01:y")],
                  env={**ENV, "torch": "2.14.0+cpu"})
    comparison = compare_runs(a, b)
    assert comparison["environment_changes"] == ["torch: 2.13.0+cpu -> 2.14.0+cpu"]
    assert all(p["environment_changed"] for p in comparison["pairs"])
    result = runner.invoke(app, ["bench", "compare", str(a), str(b)])
    assert result.exit_code == 0
    assert "environment changed: torch: 2.13.0+cpu -> 2.14.0+cpu" in result.output
    assert result.output.count("environment changed") == 1 + 4  # the header line and each variant row


def test_missing_manifest_is_an_environment_change(tmp_path):
    a = write_run(tmp_path, "a", [one_pair(5.0, 0.01, 1)], env=None)
    b = write_run(tmp_path, "b", [one_pair(5.0, 0.01, 2)])
    changes = compare_runs(a, b)["environment_changes"]
    assert changes == [f"{a} has no manifest.json"]


def test_default_threshold_is_the_run_to_run_floor(tmp_path):
    a = write_run(tmp_path, "a", [one_pair(5.0, 0.002, 1)])
    b = write_run(tmp_path, "b", [one_pair(5.4, 0.002, 2)])
    comparison = compare_runs(a, b)
    assert comparison["pairs"][0]["status"] == "same"
    assert {r["threshold"] for r in comparison["pairs"][0]["variants"]} == {run_to_run_threshold([])}
    assert compare_runs(a, b, threshold=0.02)["pairs"][0]["status"] == "slower"


def test_stored_history_sets_each_variants_threshold(tmp_path):
    chapter = tmp_path / "ch01"
    chapter.mkdir()
    a_pair, b_pair = one_pair(5.0, 0.002, 1), one_pair(5.75, 0.002, 2)
    for result in (a_pair, b_pair):
        result["files"] = [str(chapter / "baseline_x.py")]
    a = write_run(tmp_path, "a", [a_pair])
    b = write_run(tmp_path, "b", [b_pair])
    assert compare_runs(a, b)["pairs"][0]["status"] == "same"
    quiet = [{"baseline_ms": 10.0 * (1 + 0.002 * i), "optimized_ms": 5.0, "best": "optimized_x", "speedup": 2.0}
             for i in range(10)]
    atomic_write_json(chapter / "expectations_cpu.json", {"entries": {"x": {
        "environment": pair_fingerprint(a_pair, ENV), "speedup": {"value": 2.0}, "history": quiet}}})
    rows = {r["variant"]: r for r in compare_runs(a, b)["pairs"][0]["variants"]}
    assert rows["optimized_x"]["status"] == rows["baseline_x"]["status"] == "slower"
    assert rows["optimized_x"]["threshold"] < 0.12 < run_to_run_threshold([])
    assert compare_runs(a, b, threshold=0.16)["pairs"][0]["status"] == "same"


def test_cli_exit_codes(tmp_path):
    a = write_run(tmp_path, "a", [one_pair(5.0, 0.01, 1)])
    same = write_run(tmp_path, "same", [one_pair(5.0, 0.001, 2)])
    slower = write_run(tmp_path, "slower", [one_pair(6.0, 0.01, 2)])
    faster = write_run(tmp_path, "faster", [one_pair(4.0, 0.01, 2)])
    assert runner.invoke(app, ["bench", "compare", str(a), str(same)]).exit_code == 0
    result = runner.invoke(app, ["bench", "compare", str(a), str(slower)])
    assert result.exit_code == 3
    assert "1 slower" in result.output
    assert runner.invoke(app, ["bench", "compare", str(a), str(faster)]).exit_code == 0


def test_cli_usage_errors(tmp_path):
    a = write_run(tmp_path, "a", [one_pair(5.0, 0.01, 1)])
    missing = runner.invoke(app, ["bench", "compare", str(a), str(tmp_path / "nope")])
    assert missing.exit_code == 2
    assert "no such run folder" in missing.output
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "summary.json").write_text('{"results": [')
    malformed = runner.invoke(app, ["bench", "compare", str(a), str(broken)])
    assert malformed.exit_code == 2
    assert "malformed JSON" in malformed.output
    (broken / "summary.json").write_text('{"results": {"not": "a list"}}')
    assert runner.invoke(app, ["bench", "compare", str(a), str(broken)]).exit_code == 2
    assert runner.invoke(app, ["bench", "compare", str(a), str(a), "--threshold", "1.5"]).exit_code == 2


def test_only_a_slower_baseline_does_not_fail(tmp_path):
    """The baseline 30% slower, the optimized variant unchanged: reported, exit 0 (the speedup rose)."""
    a = write_run(tmp_path, "a", [one_pair(5.0, 0.01, 1)])
    b_pair = pair("ch01:x", variant("baseline_x", samples(13.0, 0.01, seed=5)),
                  [variant("optimized_x", samples(5.0, 0.01, seed=6))])
    b = write_run(tmp_path, "b", [b_pair])
    comparison = compare_runs(a, b)
    rows = {r["variant"]: r for r in comparison["pairs"][0]["variants"]}
    assert rows["baseline_x"]["status"] == "slower" and rows["baseline_x"]["role"] == "baseline"
    assert rows["optimized_x"]["status"] == "same" and comparison["pairs"][0]["status"] == "same"
    result = runner.invoke(app, ["bench", "compare", str(a), str(b)])
    assert result.exit_code == 0, result.output


def test_a_worse_headline_fails(tmp_path):
    """The baseline much faster, the optimized variant unchanged: the speedup fell from 2x to 1.1x."""
    a = write_run(tmp_path, "a", [one_pair(5.0, 0.01, 1)])
    b_pair = pair("ch01:x", variant("baseline_x", samples(5.5, 0.01, seed=5)),
                  [variant("optimized_x", samples(5.0, 0.01, seed=6))])
    b = write_run(tmp_path, "b", [b_pair])
    found = compare_runs(a, b)["pairs"][0]
    assert found["headline_worse"] and found["status"] == "slower"
    result = runner.invoke(app, ["bench", "compare", str(a), str(b)])
    assert result.exit_code == 3 and "(worse)" in result.output


def _host_bound_pair(base_ms: float, opt_ms: float, dispatch: float, seed: int) -> dict:
    """A pair whose baseline is tagged host-bound, its worker's op dispatch cost ``dispatch`` us."""
    found = pair("ch05:x", variant("baseline_x", samples(base_ms, 0.01, seed=seed), host_bound={"issue_ms": 1.0}),
                 [variant("optimized_x", samples(opt_ms, 0.01, seed=seed + 1), host_bound={"issue_ms": 1.0})])
    return {**found, "host": {"busy": [], "dispatch_us": dispatch}}


@pytest.mark.parametrize(("dispatch_b", "compared"), [(7.9, False), (4.6, True), (None, True)])
def test_host_bound_variants_of_runs_on_hosts_of_another_speed_are_not_compared(tmp_path, dispatch_b, compared):
    """Run B's host 1.88x slower (dispatch 7.9 against 4.2 us): its host-bound variants read slower and
    its headline lower, neither a change of the code; on a host within 25%, or a run without the probe, they count."""
    a = write_run(tmp_path, "a", [_host_bound_pair(26.76, 10.0, 4.2, 1)])
    b = write_run(tmp_path, "b", [_host_bound_pair(50.32, 25.0, dispatch_b, 3)])
    found = compare_runs(a, b)["pairs"][0]
    rows = {r["variant"]: r for r in found["variants"]}
    if compared:
        assert found["status"] == "slower" and rows["optimized_x"]["status"] == "slower"
        assert runner.invoke(app, ["bench", "compare", str(a), str(b)]).exit_code == 3
        return
    assert found["status"] == "not-compared" and not found["headline_worse"]
    assert {r["status"] for r in rows.values()} == {"not-compared"}
    assert rows["baseline_x"]["reason"] == "host speed differs: dispatch 7.9 us in run B against 4.2 us in run A (over 25%)"
    assert rows["baseline_x"]["ratio"]["value"] > 1.8, "the figures are still shown"
    assert runner.invoke(app, ["bench", "compare", str(a), str(b)]).exit_code == 0


def test_a_gpu_bound_variant_is_compared_whatever_the_hosts_speed(tmp_path):
    runs = [_host_bound_pair(26.76, 10.0, 4.2, 1), _host_bound_pair(50.32, 25.0, 7.9, 3)]
    for run in runs:
        del run["variants"][0]["host_bound"]
    a, b = write_run(tmp_path, "a", runs[:1]), write_run(tmp_path, "b", runs[1:])
    rows = {r["variant"]: r for r in compare_runs(a, b)["pairs"][0]["variants"]}
    assert rows["optimized_x"]["status"] == "slower" and rows["baseline_x"]["status"] == "not-compared"


def test_pairs_missing_from_one_run_do_not_fail(tmp_path):
    a = write_run(tmp_path, "a", [one_pair(5.0, 0.01, 1), one_pair(5.0, 0.01, 3, "ch02:only_a")])
    b = write_run(tmp_path, "b", [one_pair(5.0, 0.001, 2)])
    result = runner.invoke(app, ["bench", "compare", str(a), str(b)])
    assert result.exit_code == 0
    assert "1 not in run B" in result.output and "removed" not in result.output


def test_json_and_csv(tmp_path):
    import csv
    import io
    import json

    a = write_run(tmp_path, "a", [one_pair(5.0, 0.01, 1), one_pair(5.0, 0.01, 3, "ch02:only_a")])
    b = write_run(tmp_path, "b", [one_pair(6.0, 0.01, 2)])
    as_json = runner.invoke(app, ["bench", "compare", str(a), str(b), "--json"])
    assert as_json.exit_code == 3
    data = json.loads(as_json.stdout)
    assert {p["target"]: p["status"] for p in data["pairs"]} == {"ch01:x": "slower", "ch02:only_a": "not in run B"}
    as_csv = runner.invoke(app, ["bench", "compare", str(a), str(b), "--csv"])
    assert as_csv.exit_code == 3
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert [(r["target"], r["variant"], r["role"]) for r in rows] == [
        ("ch01:x", "baseline_x", "baseline"), ("ch01:x", "optimized_x", "optimized"),
        ("ch02:only_a", "baseline_x", "baseline"), ("ch02:only_a", "optimized_x", "optimized")]
    assert float(rows[1]["ratio"]) == pytest.approx(1.2, rel=0.05)
    assert rows[2]["ratio"] == "" and rows[2]["status"] == "not in run B"
    both = runner.invoke(app, ["bench", "compare", str(a), str(b), "--json", "--csv"])
    assert both.exit_code == 2 and both.stderr.startswith("error: ")


def test_table_at_120_columns_keeps_names_whole_and_agrees_with_help(tmp_path):
    from aisp.cli.bench_compare import DEFAULT_THRESHOLD

    name = "ch18:speculative_decoding_with_paged_attention"
    a = write_run(tmp_path, "a", [one_pair(5.0, 0.01, 1, name)])
    b = write_run(tmp_path, "b", [one_pair(5.0, 0.001, 2, name)], env={**ENV, "torch": "2.14.0+cpu"})
    narrow = CliRunner(env={"COLUMNS": "120"})
    result = narrow.invoke(app, ["bench", "compare", str(a), str(b)])
    assert name in result.output, "the pair's name is on one line"
    # pair, variant, ratio and status leave the note under 12 characters here: the rows are stacked,
    # nothing cut short (a table would have cut the variant names with an ellipsis)
    assert max(len(line) for line in result.output.splitlines()) <= 120 and "…" not in result.output
    assert "variant: baseline_x (baseline)" in result.output
    figure = f"{DEFAULT_THRESHOLD:.1%}"
    assert figure in " ".join(narrow.invoke(app, ["bench", "compare", "--help"]).output.split())
    assert figure in CliRunner(env={"COLUMNS": "250"}).invoke(app, ["bench", "compare", str(a), str(b)]).output
