from __future__ import annotations

import numpy as np
import pytest

from aisp.harness.stats import ratio_of_medians, summarize


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


def test_aa_interval_contains_one():
    rng = np.random.default_rng(1)
    a = 10 + rng.normal(0, 0.3, 40)
    b = 10 + rng.normal(0, 0.3, 40)
    r = ratio_of_medians(a, b)
    assert r.low <= 1.0 <= r.high


def test_clear_speedup_excludes_one():
    rng = np.random.default_rng(2)
    base = 20 + rng.normal(0, 0.5, 30)
    opt = 10 + rng.normal(0, 0.5, 30)
    r = ratio_of_medians(base, opt)
    assert r.value == pytest.approx(np.median(base) / np.median(opt))
    assert 1.8 < r.low <= r.value <= r.high < 2.2


def test_paired_drift_cancels():
    # A drift shared by both sides (interleaved samples) must not widen the interval much.
    drift = np.linspace(10, 30, 40)
    r = ratio_of_medians(2 * drift, drift)
    assert r.low == pytest.approx(2.0) and r.high == pytest.approx(2.0)


def test_slower_needs_significance_and_size():
    from aisp.harness.results import _variant_verdict

    assert _variant_verdict({"speedup": {"value": 0.9, "low": 0.85, "high": 0.95}}) == "slower"
    assert _variant_verdict({"speedup": {"value": 0.99, "low": 0.985, "high": 0.995}}) == "ok"
    assert _variant_verdict({"speedup": {"value": 0.9, "low": 0.7, "high": 1.1}}) == "ok"
