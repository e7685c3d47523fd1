"""Verdicts from synthetic samples: ``inconclusive`` (interval holds 1), ``ok-unchecked`` (a baseline
without per-call inputs), the best variant by its interval's lower end, and how the judge, the
tables and proof-of-benefit treat them."""

from __future__ import annotations

import json

import numpy as np
import pytest
from synthetic_runs import write_run

from aisp.harness.execute import UNCHECKED
from aisp.harness.results import EXIT_CODES, VERDICT_ORDER, assemble, exit_code
from aisp.judge import expectations
from aisp.judge.proof import proof_rows
from aisp.report.html_report import build_html
from aisp.report.tables import write_tables

ENV = {"hardware_key": "cpu", "gpu_name": None, "gpu_count": 0, "driver": None, "cuda": None,
       "torch": "2.13.0+cpu", "git_commit": "abc"}
REASON = "run() decodes its own samples in loader workers"


BASE_MS = list(10.0 * (1 + 0.01 * np.random.default_rng(0).standard_normal(30)))


def _raw(name: str, samples_ms: list[float], unchecked: bool = False) -> dict:
    notes = [UNCHECKED] if unchecked else []
    return {"name": name, "file": f"/x/{name}.py", "verdict": "pending", "reason": None, "host_samples_ms": [],
            "samples_ms": samples_ms, "memory": {}, "metrics": {}, "verification": {"checks": [], "notes": notes}}


def _pair(folder, name: str, variants: list[tuple[str, float, float]], unchecked: bool = False,
          reason: str | None = None) -> dict:
    """A pair whose baseline takes about 10 ms; ``variants`` are (name, speedup, spread): each
    iteration's ratio is the speedup times exp(spread x a standard normal draw)."""
    raw = [_raw(f"baseline_{name}", BASE_MS)]
    for seed, (variant, speedup, spread) in enumerate(variants, start=1):
        ratios = speedup * np.exp(spread * np.random.default_rng(seed).standard_normal(len(BASE_MS)))
        raw.append(_raw(variant, list(np.asarray(BASE_MS) / ratios), unchecked))
    info = {"target": f"{folder.name}:{name}", "group": folder.name, "name": name,
            "files": [str(folder / f"baseline_{name}.py")]}
    workload = {"headline": "time", "requires": {"gpus": 1, "ranks": 1}, "no_inputs_reason": reason}
    return assemble(info, workload, raw)


def test_an_interval_holding_one_is_inconclusive_with_exit_0(tmp_path):
    """ch07:noncontiguous_views read 1.07x [0.98, 1.17] and was called ok."""
    result = _pair(tmp_path, "views", [("optimized_views", 1.07, 0.3)])
    speedup = result["speedup"]
    assert speedup["low"] < 1.0 < speedup["high"]
    assert result["variants"][0]["verdict"] == "inconclusive" and result["verdict"] == "inconclusive"
    assert exit_code([result]) == 0


def test_ok_needs_the_interval_above_one_and_slower_is_unchanged(tmp_path):
    fast = _pair(tmp_path, "fast", [("optimized_fast", 2.0, 0.01)])
    slow = _pair(tmp_path, "slow", [("optimized_slow", 0.8, 0.01)])
    assert fast["speedup"]["low"] > 1.0 and fast["verdict"] == "ok"
    assert slow["speedup"]["high"] < 1.0 and slow["verdict"] == "slower" and exit_code([slow]) == 1
    assert slow["reason"].startswith("optimized_slow: slower: 0.80x") and "is below 1" in slow["reason"]
    assert fast["reason"] is None


def test_a_ladder_step_at_parity_makes_the_pair_inconclusive(tmp_path):
    result = _pair(tmp_path, "ladder", [("optimized_ladder", 2.0, 0.01), ("optimized_ladder_step", 1.0, 0.05)])
    assert [v["verdict"] for v in result["variants"]] == ["ok", "inconclusive"]
    assert result["verdict"] == "inconclusive" and result["best"] == "optimized_ladder"
    # the pair's reason says which variant made it inconclusive (the best one's 2.0x is not why)
    assert result["reason"].startswith("optimized_ladder_step: inconclusive: 1.0") and "holds 1" in result["reason"]


def test_the_best_variant_has_the_highest_lower_end_not_the_highest_estimate(tmp_path):
    """A noisy variant whose point estimate is the largest loses to a steady one whose interval
    starts higher: picking the largest of several estimates rewards the luckiest draw."""
    result = _pair(tmp_path, "pick", [("optimized_pick_noisy", 2.2, 0.6), ("optimized_pick_steady", 2.0, 0.01)])
    noisy, steady = (v["speedup"] for v in result["variants"])
    assert noisy["value"] > steady["value"] and noisy["low"] < steady["low"]
    assert result["best"] == "optimized_pick_steady" and result["speedup"] == steady


def test_a_baseline_without_inputs_makes_the_pair_ok_unchecked(tmp_path):
    result = _pair(tmp_path, "cached", [("optimized_cached", 2.0, 0.01)], unchecked=True)
    assert result["variants"][0]["verdict"] == "ok-unchecked" and result["verdict"] == "ok-unchecked"
    assert result["unchecked"] and "declares no per-call `inputs`" in result["reason"]
    assert exit_code([result]) == 0


def test_unchecked_is_not_hidden_by_an_inconclusive_interval_but_slower_stays(tmp_path):
    parity = _pair(tmp_path, "parity", [("optimized_parity", 1.0, 0.05)], unchecked=True)
    slow = _pair(tmp_path, "slow", [("optimized_slow", 0.8, 0.01)], unchecked=True)
    assert parity["verdict"] == "ok-unchecked" and slow["verdict"] == "slower"


def test_a_stated_reason_is_shown_and_the_mark_stays(tmp_path):
    result = _pair(tmp_path, "loader", [("optimized_loader", 2.0, 0.01)], unchecked=True, reason=REASON)
    assert result["verdict"] == "ok-unchecked" and f"no per-call inputs by design: {REASON}" in result["reason"]


def test_verdict_order_and_exit_codes_know_every_verdict():
    assert VERDICT_ORDER.index("ok") < VERDICT_ORDER.index("inconclusive") < VERDICT_ORDER.index("ok-unchecked")
    assert VERDICT_ORDER.index("ok-unchecked") < VERDICT_ORDER.index("slower")
    assert set(VERDICT_ORDER) <= EXIT_CODES.keys()
    assert EXIT_CODES["inconclusive"] == EXIT_CODES["ok-unchecked"] == 0


def _entries(folder) -> dict:
    path = folder / "expectations_cpu.json"
    return json.loads(path.read_text())["entries"] if path.exists() else {}


def test_update_stores_inconclusive_and_reasoned_unchecked_but_refuses_unchecked(tmp_path):
    results = [_pair(tmp_path, "parity", [("optimized_parity", 1.07, 0.3)]),
               _pair(tmp_path, "loader", [("optimized_loader", 2.0, 0.01)], unchecked=True, reason=REASON),
               _pair(tmp_path, "cached", [("optimized_cached", 2.0, 0.01)], unchecked=True)]
    assert [r["verdict"] for r in results] == ["inconclusive", "ok-unchecked", "ok-unchecked"]
    expectations.update(results, ENV)
    assert sorted(_entries(tmp_path)) == ["loader", "parity"]
    refused = expectations.refused(results)
    assert len(refused) == 1 and refused[0].startswith(f"{tmp_path.name}:cached: not stored in expectations")
    assert "`no_inputs_reason`" in refused[0]


def test_an_unchecked_pair_without_a_reason_is_not_judged(tmp_path):
    expectations.update([_pair(tmp_path, "cached", [("optimized_cached", 2.0, 0.01)], unchecked=True,
                               reason=REASON)], ENV)
    reasoned = _pair(tmp_path, "cached", [("optimized_cached", 0.5, 0.01)], unchecked=True, reason=REASON)
    bare = _pair(tmp_path, "cached", [("optimized_cached", 0.5, 0.01)], unchecked=True)
    assert expectations.judge(reasoned, ENV)["verdict"] == "regressed"
    judged = expectations.judge(bare, ENV)
    assert judged["verdict"] == "slower" and judged["expectation"]["status"] == "not-compared"
    bare_fast = expectations.judge(_pair(tmp_path, "cached", [("optimized_cached", 2.0, 0.01)], unchecked=True), ENV)
    assert bare_fast["expectation"]["status"] == "not-compared"
    assert "declares no per-call `inputs`" in bare_fast["expectation"]["detail"]


def test_an_inconclusive_pair_is_judged_against_its_history(tmp_path):
    expectations.update([_pair(tmp_path, "parity", [("optimized_parity", 2.0, 0.01)])], ENV)
    judged = expectations.judge(_pair(tmp_path, "parity", [("optimized_parity", 1.0, 0.05)]), ENV)
    assert judged["verdict"] == "regressed" and judged["expectation"]["status"] == "regressed"


def _noted(result: dict, *notes: str) -> dict:
    return {**result, "notes": list(notes)}


def test_notes_and_new_verdicts_reach_summary_md_csv_and_each_pair(tmp_path):
    results = [_noted(_pair(tmp_path, "cached", [("optimized_cached", 2.0, 0.01)], unchecked=True),
                      f"optimized_cached: {UNCHECKED}"),
               _noted(_pair(tmp_path, "parity", [("optimized_parity", 1.07, 0.3)]),
                      "optimized_parity: torch threads changed; put back")]
    write_tables(tmp_path, results)
    summary = (tmp_path / "summary.md").read_text()
    assert "| ok-unchecked |" in summary and "| inconclusive |" in summary
    assert f"- {tmp_path.name}:cached: optimized_cached: {UNCHECKED}" in summary
    assert "parity: optimized_parity: torch threads changed; put back" in summary
    csv_text = (tmp_path / "summary.csv").read_text()
    assert csv_text.splitlines()[0].endswith(",notes") and UNCHECKED in csv_text
    pair_md = (tmp_path / f"{tmp_path.name}_cached" / "results" / "benchmark_test_results.md").read_text()
    assert "# " in pair_md and "ok-unchecked" in pair_md and UNCHECKED in pair_md


def test_notes_and_new_verdicts_reach_the_html_report(tmp_path):
    pytest.importorskip("matplotlib")
    results = [_noted(_pair(tmp_path, "cached", [("optimized_cached", 2.0, 0.01)], unchecked=True),
                      f"optimized_cached: {UNCHECKED}"),
               _pair(tmp_path, "parity", [("optimized_parity", 1.07, 0.3)])]
    run = write_run(tmp_path, "20250101-000000", results, env=ENV)
    page = build_html(run)
    assert "<td>ok-unchecked</td>" in page and "<td>inconclusive</td>" in page
    assert f"<li>{tmp_path.name}:cached: optimized_cached: {UNCHECKED}</li>" in page


def test_proof_of_benefit_shows_inconclusive_and_unchecked_with_notes(tmp_path):
    results = [_pair(tmp_path, "parity", [("optimized_parity", 1.07, 0.3)]),
               _noted(_pair(tmp_path, "cached", [("optimized_cached", 2.0, 0.01)], unchecked=True),
                      f"optimized_cached: {UNCHECKED}"),
               _pair(tmp_path, "fast", [("optimized_fast", 2.0, 0.01)])]
    write_run(tmp_path / "runs", "20250101-000000", results, env=ENV)
    rows = {r["target"].split(":")[1]: r for r in proof_rows(tmp_path / "runs")[0]}
    assert {name: r["status"] for name, r in rows.items()} == {
        "parity": "inconclusive", "cached": "ok-unchecked", "fast": "ok"}
    assert "includes 1.0" in rows["parity"]["reason"] and UNCHECKED in rows["cached"]["notes"]
    assert "declares no per-call `inputs`" in rows["cached"]["reason"]


def test_proof_of_benefit_calls_an_old_ok_with_an_interval_holding_one_inconclusive(tmp_path):
    """Results written before the verdict existed said ``ok`` for 1.07x [0.98, 1.17]."""
    old = {**_pair(tmp_path, "views", [("optimized_views", 1.07, 0.3)]), "verdict": "ok"}
    write_run(tmp_path / "runs", "20250101-000000", [old], env=ENV)
    assert proof_rows(tmp_path / "runs")[0][0]["status"] == "inconclusive"


def test_the_readme_and_the_cli_help_list_every_verdict_with_its_exit_code():
    from conftest import REPO

    from aisp.cli.bench import EXIT_CODES_HELP

    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("### Verdicts"):readme.index("## Chapters")]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    for verdict in VERDICT_ORDER:
        row = next(line for line in rows if f"`{verdict}`" in line.split("|")[1])
        assert row.split("|")[2].strip() == str(EXIT_CODES[verdict]), row
    assert "inconclusive" in EXIT_CODES_HELP and "ok-unchecked" in EXIT_CODES_HELP
