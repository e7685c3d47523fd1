"""Simulated runs of many pairs: unchanged code is rarely flagged, a real regression is caught.

Each synthetic pair has within-run noise of 1-3% (sample CV) and run-to-run noise of 2-7% (std of
a median's or the speedup's log change between two separate runs: the H200 moved identical ch13
code by 3.7% and 7.2%). Results are assembled by the harness itself, so the speedup intervals are
the ones a real run reports. A whole-book run (160 pairs) is judged as ``aisp bench run`` judges
it: a pair flagged regressed is run twice more and stays flagged only if those re-runs confirm it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from synthetic_runs import NoisyPair, noisy_pairs, pair, variant

from aisp.harness import stats
from aisp.harness.results import assemble
from aisp.judge.compare_runs import compare_pair
from aisp.judge.expectations import pair_fingerprint, stored_entry
from aisp.judge.regression import judge_entry

ENV = {"hardware_key": "h200", "gpu_name": "NVIDIA H200", "gpu_count": 1, "driver": "580", "cuda": "13.0",
       "torch": "2.11", "git_commit": "abc"}
REGRESSION = 1.25
"""The optimized time 25% longer: the speedup 20% lower."""


@pytest.fixture(autouse=True)
def fewer_resamples(monkeypatch):
    """Thousands of results: a coarser bootstrap keeps the test fast and the intervals honest."""
    monkeypatch.setattr(stats, "BOOTSTRAP_RESAMPLES", 200, raising=False)


def _result(samples: tuple[list[float], list[float]]) -> dict:
    raw = [{"name": "baseline_p", "verdict": "pending", "samples_ms": samples[0], "host_samples_ms": [],
            "memory": {}},
           {"name": "optimized_p", "verdict": "pending", "samples_ms": samples[1], "host_samples_ms": [],
            "memory": {}}]
    info = {"target": "sim:p", "group": "sim", "name": "p", "files": [str(Path("/sim/baseline_p.py"))]}
    return assemble(info, {"headline": "time", "requires": {"gpus": 1, "ranks": 1}}, raw)


def _stored(noisy: NoisyPair, rng: np.random.Generator, runs: int) -> dict:
    entry = None
    for _ in range(runs):
        entry = stored_entry(_result(noisy.run(rng)), entry, ENV)
    return entry


def _flag_rates(count: int, stored_runs: int, seed: int) -> tuple[float, float]:
    """(share of unchanged pairs flagged regressed, share of 20% regressions flagged)."""
    rng = np.random.default_rng(seed)
    fingerprint = pair_fingerprint(_result(([1.0, 1.0], [1.0, 1.0])), ENV)
    false, caught = 0, 0
    for noisy in noisy_pairs(count, rng, run_to_run=(0.02, 0.07)):
        entry = _stored(noisy, rng, stored_runs)
        false += judge_entry(_result(noisy.run(rng)), entry, fingerprint)["status"] == "regressed"
        caught += judge_entry(_result(noisy.run(rng, REGRESSION)), entry, fingerprint)["status"] == "regressed"
    return false / count, caught / count


PAIRS = 500
"""Simulated pairs for a rate's check: at 500, a judge flagging 2.5% of unchanged pairs (2.5x the 1%
limit) fails ``<= 1%`` with probability 0.986 and one catching 93% of regressions (2 points under a
95% limit) fails ``>= 95%`` with 0.957 (binomial tails); at this simulation's rates (0.2-0.3% flagged,
97-98% caught at 1,500 pairs) the checks pass with probability > 0.995."""


# One stored run catches 90.5% at 1,500 pairs, half a point over its 90% limit: that check keeps 1,500
# (at 500 its binomial spread, 1.3 points, would make the seed decide it).
@pytest.mark.parametrize(("stored_runs", "count", "catch"), [(1, 1500, 0.90), (3, PAIRS, 0.95)])
def test_unchanged_code_is_rarely_flagged_and_a_20_percent_regression_is_caught(stored_runs, count, catch):
    """With one stored run a 20% drop of the speedup is caught in >= 90% of pairs (the speedup alone
    decides: absolute times start from a wide prior, since between processes they moved 60% on the
    H200 while the speedup held); with three stored runs in >= 95%."""
    false, caught = _flag_rates(count, stored_runs, seed=stored_runs)
    assert false <= 0.01, f"{false:.2%} of unchanged pairs flagged with {stored_runs} stored run(s)"
    assert caught >= catch, f"only {caught:.2%} of 20% regressions caught with {stored_runs} stored run(s)"


BOOK = 160
"""Pairs of a whole-book run."""


def _flagged_and_confirmed(noisy: NoisyPair, entry: dict, fingerprint: dict, rng: np.random.Generator,
                           slowdown: float, reruns: int = 2) -> tuple[bool, bool]:
    """(flagged by its run, still regressed once ``reruns`` fresh runs of the same code are judged)."""
    first = _result(noisy.run(rng, slowdown))
    if judge_entry(first, entry, fingerprint)["status"] != "regressed":
        return False, False
    again = [_result(noisy.run(rng, slowdown)) for _ in range(reruns)]
    return True, judge_entry({**first, "reruns": again}, entry, fingerprint)["status"] == "regressed"


def test_a_whole_book_run_of_unchanged_code_rarely_has_a_confirmed_false_alarm():
    """25 books of 160 pairs (three stored runs each, as issue 29 re-baselines them), each run four
    times on unchanged code: a run with any pair flagged regressed by its one run is common (the 1%
    per pair adds up over 160), a run with a flag the two re-runs confirm is at most 5%."""
    # 100 runs: 23 are flagged against the check's more than 20, so fewer runs would leave it to the seed.
    rng = np.random.default_rng(29)
    fingerprint = pair_fingerprint(_result(([1.0, 1.0], [1.0, 1.0])), ENV)
    runs, flagged, confirmed = 0, 0, 0
    for _ in range(25):
        book = noisy_pairs(BOOK, rng, run_to_run=(0.02, 0.07))
        entries = [_stored(noisy, rng, 3) for noisy in book]
        for _ in range(4):
            outcomes = [_flagged_and_confirmed(n, e, fingerprint, rng, 1.0) for n, e in zip(book, entries, strict=True)]
            runs += 1
            flagged += any(f for f, _ in outcomes)
            confirmed += any(c for _, c in outcomes)
    assert confirmed / runs <= 0.05, f"{confirmed} of {runs} whole-book runs had a confirmed false alarm"
    assert flagged / runs > 0.2, f"only {flagged} of {runs} runs flagged anything: the re-runs are not what controls it"


def test_a_20_percent_slowdown_is_flagged_and_confirmed_in_at_least_95_percent_of_pairs():
    rng = np.random.default_rng(30)
    fingerprint = pair_fingerprint(_result(([1.0, 1.0], [1.0, 1.0])), ENV)
    pairs = noisy_pairs(PAIRS, rng, run_to_run=(0.02, 0.07))
    caught = [_flagged_and_confirmed(n, _stored(n, rng, 3), fingerprint, rng, REGRESSION)[1] for n in pairs]
    assert np.mean(caught) >= 0.95, f"only {np.mean(caught):.1%} of 20% slowdowns confirmed"


def _two_runs(noisy: NoisyPair, rng: np.random.Generator) -> list[dict]:
    runs = []
    for _ in range(2):
        base, opt = noisy.run(rng)
        runs.append(pair("sim:p", variant("baseline_p", base), [variant("optimized_p", opt)]))
    return runs


# The old threshold's check (more than 10% called) reads 45% at 200 pairs: 200 leave it far past its limit.
@pytest.mark.parametrize(("threshold", "at_most", "count"), [(None, 0.01, PAIRS), (0.02, 1.0, 200)])
def test_compare_calls_identical_code_same_or_ambiguous(threshold, at_most, count):
    """At the old fixed 2% threshold a large share of identical pairs read faster or slower."""
    rng = np.random.default_rng(5)
    statuses = [compare_pair("sim:p", *_two_runs(noisy, rng), threshold)["status"]
                for noisy in noisy_pairs(count, rng, run_to_run=(0.02, 0.03))]
    called = np.mean([s in ("faster", "slower") for s in statuses])
    assert called <= at_most, f"{called:.1%} of identical pairs called faster or slower"
    if threshold is not None:
        assert called > 0.1, f"only {called:.1%}: the simulation does not show the within-run flaw"
