"""The baseline timed alone before any other variant's setup, against its interleaved samples: a
variant that slows it through state they share (ch07:l2_persistence's set-aside, once) is named, and
an ``ok`` speedup over a baseline slowed 25% or more becomes ``inconclusive``."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from aisp.harness import execute
from aisp.harness.discovery import resolve_targets
from aisp.harness.loader import import_module_at
from aisp.harness.options import RunOptions
from aisp.harness.results import assemble
from aisp.harness.runner import run_suite
from aisp.harness.stats import SLOWED_ALPHA, precedence_p, slowed_beside
from aisp.harness.timing import Timed
from aisp.harness.worker import raw_record

TIMING = Path(__file__).resolve().parent / "fixtures" / "timing"


def test_the_precedence_chance_is_exact():
    """C(k + m, k) / C(k + n, k): for 5 alone against 20, at most 6 under the slowest alone is within 1%,
    7 is not; against 2 interleaved samples no count is."""
    assert precedence_p(5, 20, 0) == pytest.approx(1 / 53130)
    assert precedence_p(5, 20, 6) <= SLOWED_ALPHA < precedence_p(5, 20, 7)
    assert precedence_p(5, 10, 2) <= SLOWED_ALPHA < precedence_p(5, 10, 3)
    assert precedence_p(5, 2, 0) > SLOWED_ALPHA
    assert precedence_p(3, 4, 4) == 1.0


def test_a_baseline_slowed_beside_the_variants_is_named():
    """ch07:l2_persistence as it ran: 0.3753 ms alone, 0.80 ms interleaved."""
    alone = [0.3753, 0.3749, 0.3760, 0.3751, 0.3757]
    mixed = [0.80 + 0.002 * (i % 5) for i in range(20)]
    slowed = slowed_beside(alone, mixed)
    assert slowed is not None
    assert slowed["ratio"] == pytest.approx(0.804 / 0.3753, rel=1e-3)
    assert slowed["solo_samples"] == 5 and slowed["interleaved_under_slowest_solo"] == 0


@pytest.mark.parametrize("alone, mixed", [
    ([1.0, 1.01, 0.99, 1.0, 1.02], [1.05 + 0.001 * i for i in range(20)]),  # separated, but 5-6%: drift
    ([1.0, 1.0, 1.0, 1.0, 3.0], [2.0] * 20),  # twice as slow, but one sample alone slower than all
    ([1.0] * 5, [2.0] * 6 + [0.9] * 14),  # the median is not slower
    ([0.004, 0.004, 0.004, 0.004, 0.004], [0.009] * 20),  # 2.25x, but 5 us: under the 10 us floor
    ([1.0] * 5, [2.0, 2.0]),  # two interleaved samples can never show it beyond 1%
    ([], [2.0] * 20),  # not timed alone
])
def test_what_noise_can_explain_is_not_named(alone, mixed):
    assert slowed_beside(alone, mixed) is None


@pytest.mark.parametrize("sigma", [0.02, 0.3, 1.0])
def test_one_distribution_alone_and_interleaved_rarely_fires(sigma):
    """5 against 20 draws of one distribution (log-normal, 2% to 100% spread), 4,000 times: the rule
    fires in at most 1% of them (the rank condition alone bounds it there, whatever the spread)."""
    rng = np.random.default_rng(7)
    draws = rng.lognormal(0.0, sigma, size=(4000, 25))
    fired = sum(slowed_beside(d[:5], d[5:]) is not None for d in draws)
    assert fired <= 0.01 * len(draws)


def _base(alone: list[float], mixed: list[float], **extra) -> dict:
    return {"name": "baseline_x", "verdict": "pending", "samples_ms": mixed, "solo_samples_ms": alone,
            "verification": {"checks": [], "notes": []}, **extra}


def _optimized(samples: list[float]) -> dict:
    return {"name": "optimized_x", "verdict": "pending", "samples_ms": samples,
            "verification": {"checks": ["matches"], "notes": []}}


def _pair(base: dict, fast: list[float]) -> dict:
    return assemble({"name": "x"}, {"inputs": ["a"]}, [base, _optimized(fast)])


def test_a_speedup_over_a_baseline_slowed_25_percent_is_inconclusive():
    result = _pair(_base([0.375] * 4 + [0.376], [0.80 + 0.001 * i for i in range(20)]), [0.42] * 20)
    base = result["baseline"]
    assert base["solo_ms"] == 0.375 and base["interference"]["ratio"] > 2
    assert result["variants"][0]["verdict"] == result["verdict"] == "inconclusive"
    assert result["variants"][0]["speedup"]["low"] > 1
    note = base["verification"]["notes"][-1]
    assert note.startswith("ran 2.16x slower once the other variants were set up: 0.375 ms alone (5 samples")
    assert note.endswith("the speedups over it are not trusted")
    assert "over a baseline slowed beside it" in result["reason"]
    assert "baseline_x: ran 2.16x slower beside the other variants than alone" in result["reason"]


def test_a_baseline_slowed_under_25_percent_is_named_but_keeps_the_verdict():
    result = _pair(_base([1.0] * 5, [1.15 + 0.001 * i for i in range(20)]), [0.5] * 20)
    assert result["baseline"]["interference"]["ratio"] == pytest.approx(1.1595, rel=1e-3)
    assert result["verdict"] == "ok" and result["reason"] is None
    assert not result["baseline"]["verification"]["notes"][-1].endswith("not trusted")


def test_a_host_bound_baseline_slowed_beside_the_variants_is_named_and_keeps_the_verdict():
    """A host-bound baseline (events about its issue time) follows the host, whose load can differ
    between the phase alone and the interleaved one: the note names both readings, the verdict stays."""
    mixed = [0.80 + 0.001 * i for i in range(20)]
    base = _base([0.375] * 5, mixed, issue_samples_ms=[m * 0.98 for m in mixed], tail_samples_ms=[0.005] * 20)
    result = _pair(base, [0.42] * 20)
    assert result["baseline"]["host_bound"] and result["baseline"]["interference"]["ratio"] > 2
    assert result["verdict"] == "ok" and result["reason"] is None
    assert result["baseline"]["verification"]["notes"][-1].endswith("may explain it")


@pytest.mark.parametrize("base", [
    _base([], [2.0] * 20),  # not timed alone (a multi-rank pair, a non-time headline)
    _base([1.0] * 5, [2.0] * 20, sample_groups=[[2.0] * 20]),  # --cold-start: each variant in its own process
    _base([1.0] * 5, [1.02] * 20),
])
def test_no_interference_leaves_the_result_as_it_was(base):
    result = _pair(base, [0.5] * 20)
    assert result["baseline"]["interference"] is None
    assert result["verdict"] == "ok" and not result["baseline"]["verification"]["notes"]


def test_a_slower_variant_stays_slower_beside_a_slowed_baseline():
    result = _pair(_base([1.0] * 5, [2.0 + 0.001 * i for i in range(20)]), [3.0 + 0.001 * i for i in range(20)])
    assert result["verdict"] == "slower"


@pytest.fixture
def fake_clock(monkeypatch):
    """Runs each call (the fixture's wait set to 0) and reads it as 5 ms x LOAD[0], ±2% from a seeded
    generator: the harness's path on a clock no busy host can move."""
    module = import_module_at(TIMING / "common_timing.py")
    monkeypatch.setattr(module, "WAIT_S", 0.0)
    rng = np.random.default_rng(3)

    def time_call(fn, device, calls=1, spacer=0.0, before=None, cuda=None):
        for _ in range(calls):
            out = fn()
        ms = 5.0 * module.LOAD[0] * rng.uniform(0.98, 1.02)
        return Timed(out, ms, None, 0.01)
    monkeypatch.setattr(execute, "time_call", time_call)
    yield module
    sys.modules.pop("common_timing", None)


@pytest.mark.parametrize("pair, slowed", [("loaded", True), ("unloaded", False)])
def test_the_harness_times_the_baseline_alone_before_the_others_setup(fake_clock, pair, slowed):
    """In this process, on the fake clock: the loaded pair's optimized setup() makes the baseline wait
    40 times as long (a list changed in place, which the settings watch does not see); alone, before
    that setup, its samples read 5 ms."""
    options = RunOptions(iterations=10, warmup=1, warmup_s=0.0, device="cpu")
    paths = [TIMING / f"baseline_{pair}.py", TIMING / f"optimized_{pair}.py"]
    variants, workload, skip = execute.run_variants(paths, options)
    assert skip is None and fake_clock.LOAD == [1]
    raw = [raw_record(v) for v in variants]
    assert len(raw[0]["solo_samples_ms"]) == execute.SOLO_SAMPLES and not raw[1]["solo_samples_ms"]
    assert max(raw[0]["solo_samples_ms"]) < 5.2
    result = assemble({"name": pair}, execute.workload_dict(workload), raw)
    assert (result["baseline"]["interference"] is not None) is slowed
    assert ("slower beside the other variants than alone" in (result["reason"] or "")) is slowed, result["reason"]
    assert any("slower once the other variants were set up" in n for n in result["baseline"]["verification"]["notes"]) is slowed


def test_the_loaded_pair_is_flagged_on_the_real_clock(tmp_path):
    """In the worker, on the real clock (a wait of 5 ms against 200 ms: a busy host's delays stay far
    under that): the baseline's interference, the note and the verdict. The unloaded pair records its
    samples alone; on a busy host its phases can differ (it is held quiet on the fake clock above)."""
    options = RunOptions(iterations=10, warmup=1, warmup_s=0.0, device="cpu", artifacts_dir=tmp_path)
    results, _ = run_suite(resolve_targets(["timing:loaded", "timing:unloaded"], TIMING, (TIMING,)), options)
    loaded, unloaded = results
    assert loaded["baseline"]["interference"]["ratio"] > 1.25, loaded["baseline"]
    assert loaded["verdict"] == "inconclusive", loaded["reason"]
    assert any(n.startswith("baseline_loaded: ran ") for n in loaded["notes"]), loaded["notes"]
    assert unloaded["baseline"]["solo_ms"] is not None and unloaded["baseline"]["solo_samples_ms"]


def test_a_slowdown_the_sm_clock_explains_is_noted_not_named():
    """The A/A matmul of an H200 (1.386 ms alone on a cool GPU, 1.538 interleaved once it warmed into its
    power cap): with the clocks read, 1,980 MHz alone and 1,755 interleaved, the samples alone are scaled
    by their ratio and the rule stays quiet, with a note; without the clocks it fires (the false flag)."""
    alone, mixed = [1.386, 1.384, 1.386, 1.392, 1.387], [1.538 + 0.001 * i for i in range(20)]
    assert _pair(_base(alone, mixed), [1.5] * 20)["baseline"]["interference"]["ratio"] > 1.1
    result = _pair(_base(alone, mixed, solo_clock_mhz=[1980] * 5, timed_clock_mhz=1755.0), [1.5] * 20)
    base = result["baseline"]
    assert base["interference"] is None and result["verdict"] in ("ok", "slower", "inconclusive")
    assert base["verification"]["notes"][-1].startswith("ran 1.12x slower interleaved than alone (1.386 against 1.547 ms)")
    assert "1980 MHz alone, 1755 interleaved" in base["verification"]["notes"][-1]
    faster = _pair(_base(alone, mixed, solo_clock_mhz=[1755] * 5, timed_clock_mhz=1980.0), [1.5] * 20)
    assert faster["baseline"]["interference"] is not None  # a clock that rose explains nothing


def test_a_slowdown_beyond_the_clocks_fall_is_named_with_the_part_the_clock_explains():
    """2.16x slower with the clock 10% lower: still named; its ratio (what the clock does not explain,
    1.96x) decides whether the speedups are trusted, and the note gives both."""
    result = _pair(_base([0.375] * 4 + [0.376], [0.80 + 0.001 * i for i in range(20)], solo_clock_mhz=[1980] * 5,
                         timed_clock_mhz=1800.0), [0.42] * 20)
    slowed = result["baseline"]["interference"]
    assert slowed["ratio"] == pytest.approx(0.8095 / (0.375 * 1.1), rel=1e-3) and slowed["solo_ms"] == 0.375
    note = result["baseline"]["verification"]["notes"][-1]
    assert note.startswith("ran 2.16x slower once") and "1.96x beyond its SM clock's fall (1980 MHz alone, 1800" in note
    assert result["verdict"] == "inconclusive"


def test_a_slowdown_at_a_power_cap_is_allowed_a_wider_margin():
    """The A/A matmul of an H200 at its power cap, 2026-11-30: 1.375 ms alone and 1.542 interleaved,
    the SM clock read 1,530 alone and 1,515 interleaved (1%: the clock scale explains almost none of
    it). With most interleaved samples throttled by sw_power_cap the margin is 20%: quiet, with a note;
    the same samples unthrottled are named, and a power-capped 1.3x slowdown still is."""
    alone, mixed = [1.377, 1.375, 1.373, 1.377, 1.370], [1.536 + 0.001 * i for i in range(10)]
    clocks = {"solo_clock_mhz": [1530] * 5, "timed_clock_mhz": 1515.0}
    capped = {str(i): ["sw_power_cap"] for i in range(8)}
    assert _pair(_base(alone, mixed, **clocks), [1.5] * 10)["baseline"]["interference"] is not None
    quiet = _pair(_base(alone, mixed, throttled_samples=capped, **clocks), [1.5] * 10)["baseline"]
    assert quiet["interference"] is None
    note = quiet["verification"]["notes"][-1]
    assert note.startswith("ran 1.12x slower interleaved than alone (1.375 against 1.54 ms), as its SM clock fell")
    assert "and it ran at a power or thermal cap (8 of 10 samples)" in note
    few = {str(i): ["sw_power_cap"] for i in range(5)}  # half: not most
    assert _pair(_base(alone, mixed, throttled_samples=few, **clocks), [1.5] * 10)["baseline"]["interference"]
    slowed = _pair(_base(alone, [1.8 + 0.001 * i for i in range(10)], throttled_samples=capped), [1.5] * 10)
    assert slowed["baseline"]["interference"]["ratio"] > 1.3
    braked = {str(i): ["hw_power_brake_slowdown"] for i in range(8)}  # the platform's power brake is a cap too
    assert _pair(_base(alone, mixed, throttled_samples=braked, **clocks), [1.5] * 10)["baseline"]["interference"] is None
