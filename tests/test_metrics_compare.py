"""compare_and_display_all_metrics: every shared metric judged in its own direction."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from aisp.report.metrics_compare import compare_and_display_all_metrics, direction


def variant(median: float, peak: int | None, tflops: float, metrics: dict) -> dict:
    summary = {"n": 10, "median": median, "mean": median * 1.01, "std": median * 0.02, "p10": median * 0.98,
               "p90": median * 1.03, "min": median * 0.97, "max": median * 1.1, "cv": 0.02}
    return {"name": "v", "summary": summary, "host_summary": {**summary, "median": median + 0.1},
            "memory": {"peak_bytes": peak, "setup_bytes": 1024}, "throughput": {"tflops": tflops},
            "metrics": metrics}


def quiet() -> Console:
    return Console(file=io.StringIO(), width=200)


@pytest.mark.parametrize(("name", "expected"), [
    ("step_ms", "lower"), ("kv_cache_bytes", "lower"), ("p99_latency", "lower"), ("time_to_first_token", "lower"),
    ("goodput", "higher"), ("tokens_per_s", "higher"), ("achieved_tflops", "higher"), ("dram_gbps", "higher"),
    ("throughput", "higher"), ("sm_util", "higher"),
    ("loss", "?"), ("accuracy", "?"), ("throughput_time_ms", "?"),
])
def test_direction_table(name, expected):
    assert direction(name) == expected


def rows(report: dict) -> dict[str, dict]:
    return {r["metric"]: r for r in report["metrics"]}


def test_improvements_in_both_directions():
    base = variant(10.0, 4000, 1.0, {"goodput": 100.0, "step_ms": 10.0, "loss": 2.0})
    opt = variant(5.0, 1000, 2.0, {"goodput": 150.0, "step_ms": 8.0, "loss": 1.0})
    report = compare_and_display_all_metrics(base, opt, name="pair", chapter="ch07", console=quiet())
    got = rows(report)
    assert got["time_median_ms"]["change_pct"] == pytest.approx(-50.0)
    assert got["time_median_ms"]["better"] is True and got["time_median_ms"]["direction"] == "lower"
    assert got["peak_bytes"]["better"] is True and got["peak_bytes"]["change_pct"] == pytest.approx(-75.0)
    assert got["tflops"]["better"] is True and got["tflops"]["direction"] == "higher"
    assert got["tflops"]["change_pct"] == pytest.approx(100.0)
    assert got["goodput"]["better"] is True and got["step_ms"]["better"] is True
    assert got["loss"]["direction"] == "?" and got["loss"]["better"] is None
    assert report["improved"] == 7 and report["regressed"] == 0
    assert report["name"] == "pair" and report["chapter"] == "ch07"


def test_regressions_in_both_directions():
    base = variant(5.0, 1000, 2.0, {"goodput": 150.0, "step_ms": 8.0})
    opt = variant(10.0, 4000, 1.0, {"goodput": 100.0, "step_ms": 10.0})
    report = compare_and_display_all_metrics(base, opt, name="pair", console=quiet())
    assert all(r["better"] is False for r in report["metrics"])
    assert report["improved"] == 0 and report["regressed"] == len(report["metrics"]) == 7


def test_only_shared_finite_metrics_compared():
    base = variant(10.0, None, 1.0, {"goodput": 1.0, "only_here_ms": 3.0, "nan_ms": float("nan")})
    opt = variant(10.0, 2000, 1.0, {"goodput": 1.0, "nan_ms": 1.0, "flag": True})
    got = rows(compare_and_display_all_metrics(base, opt, name="p", console=quiet()))
    assert "peak_bytes" not in got and "only_here_ms" not in got and "nan_ms" not in got and "flag" not in got
    assert got["goodput"]["better"] is None and got["goodput"]["change_pct"] == 0.0


def test_raw_metrics_on_request():
    base, opt = variant(10.0, 10, 1.0, {}), variant(8.0, 10, 1.0, {})
    plain = rows(compare_and_display_all_metrics(base, opt, name="p", console=quiet()))
    raw = rows(compare_and_display_all_metrics(base, opt, name="p", include_raw_metrics=True, console=quiet()))
    extra = {"time_p10_ms", "time_min_ms", "time_max_ms", "time_std_ms", "time_cv", "host_time_median_ms",
             "setup_bytes"}
    assert not extra & set(plain)
    assert extra <= set(raw)
    assert raw["host_time_median_ms"]["baseline"] == pytest.approx(10.1)


def test_zero_baseline_has_no_percentage_but_a_call():
    base = variant(10.0, 0, 1.0, {})
    opt = variant(10.0, 512, 1.0, {})
    peak = rows(compare_and_display_all_metrics(base, opt, name="p", console=quiet()))["peak_bytes"]
    assert peak["change_pct"] is None and peak["better"] is False


def test_table_printed():
    console = quiet()
    base = variant(10.0, 4000, 1.0, {"goodput": 100.0})
    opt = variant(5.0, 8000, 2.0, {"goodput": 150.0})
    compare_and_display_all_metrics(base, opt, name="My Benchmark", chapter="ch7", console=console)
    text = console.file.getvalue()
    assert "ch7: My Benchmark" in text
    assert "time_median_ms" in text and "-50.0%" in text and "better" in text and "worse" in text
    assert "5 improved, 1 regressed" in text
