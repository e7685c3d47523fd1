"""Summaries, and the speedup intervals: paired (interleaved iterations) and grouped (--cold-start)."""

from __future__ import annotations

import numpy as np
import pytest

from aisp.harness.results import _variant_verdict
from aisp.harness.stats import grouped_ratio, paired_ratio, row_medians, summarize


def test_summarize_known_values():
    s = summarize([1.0, 2.0, 3.0, 4.0, 5.0])
    assert s.median == 3.0 and s.min == 1.0 and s.max == 5.0 and s.n == 5
    assert s.mean == pytest.approx(3.0)
    assert s.std == pytest.approx(np.std([1, 2, 3, 4, 5], ddof=1))
    assert s.cv == pytest.approx(s.std / 3.0)
    assert s.p10 == pytest.approx(1.4) and s.p90 == pytest.approx(4.6)


def test_summarize_empty_raises():
    with pytest.raises(ValueError):
        summarize([])


def _half_width(low: float, high: float) -> float:
    return (high - low) / 2


def _old_interval(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """The interval before issue 12: bootstrapped median(a) / median(b), same indices both sides."""
    idx = np.random.default_rng(0).integers(0, a.size, size=(4000, a.size))
    low, high = np.percentile(np.median(a[idx], axis=1) / np.median(b[idx], axis=1), [2.5, 97.5])
    return float(low), float(high)


def test_common_drift_cancels_in_paired_ratios():
    """A/A on the H200: samples drifted 1.39 -> 1.63 ms over 50 iterations as the clock fell; both
    sides drift alike, so per-iteration ratios stay near 1 and the interval stays narrow."""
    rng = np.random.default_rng(3)
    drift = np.linspace(1.39, 1.63, 50)
    a, b = drift * (1 + 0.01 * rng.standard_normal(50)), drift * (1 + 0.01 * rng.standard_normal(50))
    new = paired_ratio(a, b)
    assert new.low <= 1.0 <= new.high
    assert _half_width(new.low, new.high) <= 0.02
    old = _old_interval(a, b)
    assert old[0] <= 1.0 <= old[1]
    assert _half_width(*old) > 2 * _half_width(new.low, new.high)


def _ar1(n: int, rho: float, sd: float, rng: np.random.Generator) -> np.ndarray:
    x = np.empty(n)
    x[0] = rng.normal(0, sd)
    for i in range(1, n):
        x[i] = rho * x[i - 1] + rng.normal(0, sd * np.sqrt(1 - rho**2))
    return x


@pytest.mark.parametrize("n", [20, 50])
def test_serially_correlated_noise_does_not_undercover(n):
    """A/A with AR(1) noise (rho 0.5, 2%) on each side: the 95% interval holds 1 in >= 90% of 400 runs."""
    covered = 0
    for seed in range(400):
        rng = np.random.default_rng(seed)
        r = paired_ratio(1 + _ar1(n, 0.5, 0.02, rng), 1 + _ar1(n, 0.5, 0.02, rng), seed=seed)
        covered += r.low <= 1.0 <= r.high
    assert covered / 400 >= 0.90


def test_true_speedup_is_recovered():
    rng = np.random.default_rng(2)
    drift = np.linspace(20, 24, 30)
    base = drift * (1 + 0.02 * rng.standard_normal(30))
    opt = drift / 1.5 * (1 + 0.02 * rng.standard_normal(30))
    r = paired_ratio(base, opt)
    assert r.low <= 1.5 <= r.high and r.low > 1.4 and r.high < 1.6
    assert r.value == pytest.approx(np.median(base / opt))


def test_few_iterations_still_have_a_spread():
    """With 4 iterations a single block would hold them all: every resample the same median."""
    r = paired_ratio([1.0, 1.1, 0.9, 1.05], [1.0, 1.0, 1.0, 1.0])
    assert r.low < 0.95 and r.high > 1.05


def test_identical_ratio_every_iteration_has_no_width():
    drift = np.linspace(10, 30, 40)
    r = paired_ratio(2 * drift, drift)
    assert r.low == pytest.approx(2.0) and r.high == pytest.approx(2.0) and r.value == pytest.approx(2.0)


def test_grouped_interval_holds_process_to_process_spread():
    """--cold-start: three processes whose medians differ by +-5% (narrow inside each). Pooling their
    samples as if from one process gives a narrow interval; resampling processes does not."""
    rng = np.random.default_rng(4)
    base = [list(m * (1 + 0.002 * rng.standard_normal(20))) for m in (1.9, 2.0, 2.1)]
    opt = [list(1 + 0.002 * rng.standard_normal(20)) for _ in range(3)]
    grouped = grouped_ratio(base, opt)
    pooled = grouped_ratio([sum(base, [])], [sum(opt, [])])
    assert grouped.value == pytest.approx(pooled.value)
    assert grouped.low < 1.92 and grouped.high > 2.08
    assert _half_width(grouped.low, grouped.high) > 2 * _half_width(pooled.low, pooled.high)


def test_grouped_clear_speedup_excludes_one():
    rng = np.random.default_rng(5)
    base = [list(20 * (1 + 0.02 * rng.standard_normal(10))) for _ in range(3)]
    opt = [list(10 * (1 + 0.02 * rng.standard_normal(10))) for _ in range(3)]
    r = grouped_ratio(base, opt)
    assert 1.8 < r.low <= r.value <= r.high < 2.2


def test_slower_needs_significance_and_size():
    """Slower needs both; a small significant slowdown or a wide interval is not ok either."""
    assert _variant_verdict({"speedup": {"value": 0.9, "low": 0.85, "high": 0.95}}) == "slower"
    assert _variant_verdict({"speedup": {"value": 0.99, "low": 0.985, "high": 0.995}}) == "inconclusive"
    assert _variant_verdict({"speedup": {"value": 0.9, "low": 0.7, "high": 1.1}}) == "inconclusive"


def _slotted(n: int, k: int, slot_cost: float, rng: np.random.Generator) -> list[np.ndarray]:
    """k identical variants timed in rotation from a random start (as time_interleaved does): whoever
    goes first in an iteration pays ``slot_cost`` more; 0.3% noise; a common drift."""
    start, drift = int(rng.integers(k)), np.linspace(1.4, 1.6, n)
    samples = [np.empty(n) for _ in range(k)]
    for i in range(n):
        for slot, v in enumerate((start + i + j) % k for j in range(k)):
            samples[v][i] = drift[i] * (1 + slot_cost * (slot == 0)) * (1 + 0.003 * rng.standard_normal())
    return samples


@pytest.mark.parametrize("k", [2, 3])
def test_slot_order_cost_cancels_over_each_turn_of_the_rotation(k):
    """Whoever goes first after the sync pays 3% more: per-iteration ratios are then a mixture of
    +3%, -3% (and 0) and their bootstrap interval is inflated by it. Averaged over each full turn of the
    rotation, where every variant held every slot once, the slot cost cancels: the interval is
    narrower and still holds 1 in >= 93 of 100 A/A runs."""
    covered, widths = 0, []
    for seed in range(100):
        a, b, *_ = _slotted(50, k, 0.03, np.random.default_rng(seed))
        old, new = paired_ratio(a, b, seed=seed), paired_ratio(a, b, cycle=k, seed=seed)
        covered += new.low <= 1.0 <= new.high
        widths.append((old.high - old.low, new.high - new.low))
        assert abs(new.value - 1) < 0.005
    old_width, new_width = np.median(widths, axis=0)
    assert covered >= 93 and new_width < 0.95 * old_width


def test_cycle_averaging_keeps_a_true_speedup():
    rng = np.random.default_rng(5)
    a, b = _slotted(40, 2, 0.02, rng)
    r = paired_ratio(a * 1.5, b, cycle=2)
    assert r.low <= 1.5 <= r.high and abs(r.value / 1.5 - 1) < 0.005


def _loaded_host(n: int, sigma: float, rng: np.random.Generator, bias: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """A/A (or ``bias`` x slower baseline) as a loaded CPU host times it: 2n samples taken in turn from a
    random first variant (as time_interleaved does), log noise of scale ``sigma`` that is heavy-tailed
    (Student t, 3 degrees of freedom: a run of stalls) and serially correlated (AR(1), rho 0.5, over the
    time order: a burst of load hits neighbouring samples of both variants)."""
    shocks = rng.standard_t(3, size=2 * n) / np.sqrt(3.0)
    noise = np.empty(2 * n)
    noise[0] = sigma * shocks[0]
    for k in range(1, 2 * n):
        noise[k] = 0.5 * noise[k - 1] + sigma * np.sqrt(0.75) * shocks[k]
    first = int(rng.integers(2))
    order = np.array([(2 * i, 2 * i + 1)[::1 if (first + i) % 2 == 0 else -1] for i in range(n)])
    return bias * np.exp(noise[order[:, 0]]), np.exp(noise[order[:, 1]])


def _rates(n: int, sigma: float, runs: int) -> tuple[float, float]:
    """Of ``runs`` simulated runs: the share of A/A intervals holding 1, and the share of intervals for
    a 5% bias that exclude 1 (the bias found), each with the rotation's cycle of 2."""
    held = found = 0
    for seed in range(runs):
        same = paired_ratio(*_loaded_host(n, sigma, np.random.default_rng(seed)), cycle=2, seed=seed)
        held += same.low <= 1.0 <= same.high
        biased = paired_ratio(*_loaded_host(n, sigma, np.random.default_rng(10**6 + seed), 1.05), cycle=2, seed=seed)
        found += biased.low > 1.0
    return held / runs, found / runs


def test_aa_interval_holds_one_at_about_its_nominal_rate_and_a_5pct_bias_is_found_at_20_iterations():
    """The calibration the CPU A/A run cannot give (its noise on a shared 2-core host hides 5%): with
    heavy-tailed, serially correlated noise of 3% per sample, at the default 20 iterations, the 95%
    interval holds 1 in 91-99% of 400 A/A runs (94% measured) and excludes 1 for a 5% bias in >= 95%
    (98% measured)."""
    held, found = _rates(20, 0.03, 400)
    assert 0.91 <= held <= 0.99
    assert found >= 0.95


def test_at_a_loaded_hosts_noise_20_iterations_miss_5pct_and_100_find_it():
    """At 10% noise per sample, 20 iterations find a 5% bias in about a third of runs (37% measured),
    100 iterations in >= 95% (96.5%); the A/A interval still holds 1 at about its rate. (The CPU A/A
    estimates of 0.93-1.20 seen on the CI host mean ~30% noise per sample: 5% would take ~2,000.)"""
    held, found = _rates(20, 0.10, 200)
    assert found < 0.5 and held >= 0.91
    held, found = _rates(100, 0.10, 200)
    assert found >= 0.95 and held >= 0.9


@pytest.mark.parametrize("width", [1, 2, 7, 8, 20, 41])
def test_row_medians_are_numpys_bit_for_bit(width):
    x = np.random.default_rng(width).lognormal(size=(500, width))
    x[::7, 0] = x[::7, -1]  # ties
    assert np.array_equal(row_medians(x), np.median(x, axis=1))


@pytest.mark.parametrize("size", [1, 2, 3, 7, 8, 20, 41, 64])
def test_summary_percentiles_are_numpys_bit_for_bit(size):
    """summarize's one-sort quantiles equal np.percentile's, ties and constant samples included; NaN too."""
    rng = np.random.default_rng(size)
    for trial in range(300):
        x = rng.lognormal(0, rng.uniform(0.001, 1), size) * rng.uniform(0.001, 100)
        if trial % 3 == 0:
            x = np.round(x, 2)  # ties
        if trial % 50 == 0:
            x = np.full(size, 0.37)
        s = summarize(x)
        p10, p50, p90 = np.percentile(x, [10, 50, 90])
        assert (s.p10, s.median, s.p90, s.min, s.max) == (p10, p50, p90, x.min(), x.max())
    with_nan = summarize([1.0, float("nan"), 2.0])
    assert all(np.isnan(v) for v in (with_nan.median, with_nan.p10, with_nan.p90, with_nan.min, with_nan.max))
