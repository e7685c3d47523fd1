"""Host figures (a host-bound or host-heavy variant's time, the headline ratio of a pair with one) are
judged only against stored runs whose worker read a similar op dispatch cost (regression.HOST_SPEED_REL),
on synthetic results shaped like the 2 x H200 book of 2026-11-30: ch05:uint8_transfer's host-bound
baseline read 50.32 ms against 26.76 stored, on a host whose dispatch was about as much slower."""

from __future__ import annotations

import numpy as np
import pytest

from aisp.harness.results import assemble
from aisp.judge import expectations
from aisp.judge.regression import host_labels, judge_entry

ENV = {"hardware_key": "h200", "gpu_name": "NVIDIA H200", "gpu_count": 1, "driver": "580", "cuda": "13.0",
       "torch": "2.11", "triton": "3.5.0", "python": "3.12.3", "cpu_model": "Intel(R) Xeon(R) Processor",
       "git_commit": "abc"}
FAST, SLOW = 4.2, 7.9
"""Op dispatch (us) of the stored runs' host, and of a host 1.88x slower (50.32 / 26.76)."""


def _result(folder, base_ms, opt_ms, dispatch=FAST, seed=0, host_bound=("baseline",), headline="time"):
    """ch05:uint8_transfer's shape: a host-bound baseline (``host_bound`` names the tagged roles) and a
    GPU-bound optimized variant; ``dispatch`` None: a result measured before the worker read it."""
    rng = np.random.default_rng(seed)
    raw = [{"name": f"baseline_x{role}", "verdict": "pending", "memory": {"peak_bytes": 100},
            "samples_ms": list(ms * (1 + rng.normal(0, 0.005, 30))),
            "metrics": {"decode_gap_p99_ms": ms}} for role, ms in (("", base_ms), ("_opt", opt_ms))]
    raw[1]["name"] = "optimized_x"
    pair = {"target": f"{folder.name}:x", "group": folder.name, "name": "x", "files": [str(folder / "baseline_x.py")]}
    result = assemble(pair, {"headline": headline, "requires": {"gpus": 1, "ranks": 1}}, raw)
    tag = {"issue_ms": 1.0, "events_ms": 1.0, "events_over_issue": 1.0}
    for variant in [result["baseline"]] * ("baseline" in host_bound) + result["variants"] * ("optimized" in host_bound):
        variant["host_bound"] = tag
    result["host"] = {"busy": [], "dispatch_us": dispatch}
    return result


def _store(folder, runs=3, dispatch=FAST, **kwargs):
    for seed in range(1, runs + 1):
        expectations.update([_result(folder, 26.76, 0.8, dispatch, seed=seed, **kwargs)], ENV)


def _judged(folder, *args, **kwargs):
    return expectations.judge(_result(folder, *args, **kwargs), ENV)


def _entry(folder):
    return expectations.load(folder / "expectations_h200.json")["entries"]["x"]


def test_the_probe_is_stored_in_the_entry_and_each_history_run(tmp_path):
    _store(tmp_path, runs=2)
    expectations.update([_result(tmp_path, 26.76, 0.8, None, seed=3)], ENV)
    entry = _entry(tmp_path)
    assert [h["host_dispatch_us"] for h in entry["history"]] == [FAST, FAST, None]
    assert entry["host_dispatch_us"] is None


def test_a_host_bound_baseline_as_much_slower_as_the_host_is_not_regressed(tmp_path):
    """The baseline 1.88x slower on a host whose dispatch is 1.88x slower: its time and the speedup
    (the pair is host-bound) are not judged and the detail says so; the GPU-bound optimized time is."""
    _store(tmp_path)
    judged = _judged(tmp_path, 50.32, 0.8, SLOW, seed=9)
    outcome = judged["expectation"]
    assert judged["verdict"] == "ok" and outcome["status"] == "ok", outcome["detail"]
    assert [f["figure"] for f in outcome["figures"]] == ["optimized_x time"]
    assert outcome["detail"].endswith("; host figures not judged (speedup, baseline_x time): dispatch 7.9 us here "
                                      "against 4.2 us in the stored runs (no stored run within 25%)")


def test_the_same_slowdown_on_a_host_of_the_stored_speed_is_regressed(tmp_path):
    _store(tmp_path)
    judged = _judged(tmp_path, 50.32, 0.8, FAST * 1.1, seed=9)
    outcome = judged["expectation"]
    assert judged["verdict"] == "regressed", outcome["detail"]
    assert [f["figure"] for f in outcome["figures"] if f["regressed"]] == ["baseline_x time"]
    assert "host figures not judged" not in outcome["detail"]


def test_a_gpu_bound_figure_is_judged_whatever_the_hosts_speed(tmp_path):
    _store(tmp_path)
    judged = _judged(tmp_path, 50.32, 1.6, SLOW, seed=9)
    outcome = judged["expectation"]
    assert judged["verdict"] == "regressed", outcome["detail"]
    assert [f["figure"] for f in outcome["figures"] if f["regressed"]] == ["optimized_x time"]
    assert "host figures not judged (speedup, baseline_x time)" in outcome["detail"]


def test_a_result_without_the_probe_is_judged_as_before(tmp_path):
    """Older results, or re-judging an old run: every figure against the whole history."""
    _store(tmp_path)
    judged = _judged(tmp_path, 50.32, 0.8, None, seed=9)
    outcome = judged["expectation"]
    assert judged["verdict"] == "regressed" and "host figures" not in outcome["detail"]
    assert {f["figure"] for f in outcome["figures"]} == {"speedup", "baseline_x time", "optimized_x time"}


def test_stored_runs_without_the_probe_do_not_judge_a_host_figure(tmp_path):
    _store(tmp_path, dispatch=None)
    outcome = _judged(tmp_path, 50.32, 0.8, FAST, seed=9)["expectation"]
    assert outcome["status"] == "ok", outcome["detail"]
    assert outcome["detail"].endswith("host figures not judged (speedup, baseline_x time): dispatch 4.2 us here, "
                                      "not read in the stored runs")


def test_a_history_of_two_host_speeds_judges_against_the_matching_runs_only(tmp_path):
    """Three runs on each host stored in one history (a slow host's run is appended, not a new level):
    a new run is held against the three of its own host's speed."""
    _store(tmp_path)
    for seed in (4, 5, 6):
        expectations.update([_result(tmp_path, 50.32, 0.8, SLOW, seed=seed)], ENV)
    assert len(_entry(tmp_path)["history"]) == 6
    for dispatch, base_ms in ((FAST, 26.76), (SLOW, 50.32)):
        outcome = _judged(tmp_path, base_ms, 0.8, dispatch, seed=9)["expectation"]
        baseline = next(f for f in outcome["figures"] if f["figure"] == "baseline_x time")
        assert outcome["status"] == "ok" and baseline["runs"] == 3, outcome["detail"]
        assert baseline["reference"] == pytest.approx(base_ms, rel=0.01)
        optimized = next(f for f in outcome["figures"] if f["figure"] == "optimized_x time")
        assert optimized["runs"] == 6, "a GPU-bound figure is judged against every run"
    assert _judged(tmp_path, 50.32, 0.8, FAST, seed=9)["verdict"] == "regressed"


def test_storing_a_slow_hosts_run_appends_it_to_the_history(tmp_path):
    """Its host figures are left out of the level check too: appended, not held as pending; without
    the probe the same run leaves the level and is held as the entry's pending run."""
    _store(tmp_path)
    expectations.update([_result(tmp_path, 50.32, 0.8, SLOW, seed=9)], ENV)
    entry = _entry(tmp_path)
    assert len(entry["history"]) == 4 and "pending" not in entry and entry["host_dispatch_us"] == SLOW
    other = tmp_path / "other"
    other.mkdir()
    _store(other)
    expectations.update([_result(other, 50.32, 0.8, None, seed=9)], ENV)
    held = _entry(other)
    assert len(held["history"]) == 3 and held["pending"]["baseline_ms"] > 45


def test_every_figure_a_host_figure_left_out_is_not_compared(tmp_path):
    """Both variants host-bound on a slower host: nothing is judged; a note says why, never a regression."""
    both = ("baseline", "optimized")
    _store(tmp_path, host_bound=both)
    judged = _judged(tmp_path, 50.32, 1.6, SLOW, seed=9, host_bound=both)
    outcome = judged["expectation"]
    assert judged["verdict"] == "ok" and outcome["status"] == "not-compared" and outcome["why"] == "host speed differs"
    assert outcome["detail"] == ("host speed differs: host figures not judged (speedup, baseline_x time, optimized_x "
                                 "time): dispatch 7.9 us here against 4.2 us in the stored runs (no stored run within 25%)")
    assert judged["notes"][-1] == f"not compared: {outcome['detail']}"
    same_host = _judged(tmp_path, 50.32, 1.6, FAST, seed=9, host_bound=both)
    assert same_host["verdict"] == "regressed", same_host["expectation"]["detail"]


@pytest.mark.parametrize(("host_bound", "is_host"), [(("baseline",), True), (("optimized",), True), ((), False)])
def test_a_metric_headlines_ratio_is_a_host_figure_when_a_variant_is_host_bound(tmp_path, host_bound, is_host):
    """ch15:chunked_prefill's decode-gap ratio (host-heavy serving loops) read 2.94x against 3.35x on
    the slower host: a host figure there, judged at any host speed where neither variant is host-bound."""
    headline = "metric:decode_gap_p99_ms"
    _store(tmp_path, host_bound=host_bound, headline=headline)
    result = _result(tmp_path, 26.76 * 2.94 / 3.35, 0.8, SLOW, seed=9, host_bound=host_bound, headline=headline)
    assert ("metric:decode_gap_p99_ms ratio" in host_labels(result, _entry(tmp_path))) is is_host
    outcome = judge_entry(result, _entry(tmp_path), expectations.pair_fingerprint(result, ENV))
    ratio = [f for f in outcome.get("figures", []) if f["figure"].endswith("ratio")]
    assert (not ratio) is is_host, outcome["detail"]


def test_host_heavy_variants_are_host_figures_as_tagged_ones_are(tmp_path):
    """A baseline whose host issue is 87% of its events (the judge's host-heavy rule) counts too."""
    _store(tmp_path, host_bound=())
    result = _result(tmp_path, 50.32, 0.8, SLOW, seed=9, host_bound=())
    assert host_labels(result, _entry(tmp_path)) == set()
    result["baseline"].update({"issue_summary": {"median": 43.8}, "tail_summary": {"median": 0.08},
                               "spacer_ms": 0.0, "syncs_inside": False})
    assert host_labels(result, _entry(tmp_path)) == {"speedup", "baseline_x time"}


def test_re_runs_are_judged_with_their_own_probe(tmp_path):
    """A flag raised at the stored host speed is confirmed by re-runs read at that speed; re-runs whose
    own probe reads a slower host cannot judge the flagged host figure, so they do not confirm it."""
    _store(tmp_path)
    first = _result(tmp_path, 50.32, 0.8, FAST, seed=9)
    same = judge_entry({**first, "reruns": [_result(tmp_path, 50.32, 0.8, FAST, seed=10 + i) for i in range(2)]},
                       _entry(tmp_path), expectations.pair_fingerprint(first, ENV))
    assert same["status"] == "regressed" and same["confirmation"]["confirmed"], same["detail"]
    slower = judge_entry({**first, "reruns": [_result(tmp_path, 50.32, 0.8, SLOW, seed=10 + i) for i in range(2)]},
                         _entry(tmp_path), expectations.pair_fingerprint(first, ENV))
    assert slower["status"] == "ok" and not slower["confirmation"]["confirmed"], slower["detail"]
    assert "baseline_x time not judged in them" in slower["detail"]
