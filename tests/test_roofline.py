"""Roofline math on known numbers, annotate on synthetic variants, and the plot's content."""

from __future__ import annotations

import pytest

from aisp.report.roofline import PairPoints, annotate, bound_tflops, figure, pair_points, peak_compute, plot

PEAKS = {
    "provenance": {"hardware_key": "testhw"},
    "measurements": {
        "matmul_fp32": {"value": 50.0, "unit": "TFLOP/s", "detail": ""},
        "matmul_bf16": {"value": 800.0, "unit": "TFLOP/s", "detail": ""},
        "memory_copy": {"value": 4000.0, "unit": "GB/s", "detail": ""},
    },
}


def variant(median_ms: float) -> dict:
    return {"name": "v", "summary": {"median": median_ms}}


def test_bound_is_the_lower_of_bandwidth_slope_and_compute_roof() -> None:
    assert bound_tflops(10, peak_tflops=100, peak_gbps=2000) == pytest.approx(20)
    assert bound_tflops(1000, peak_tflops=100, peak_gbps=2000) == pytest.approx(100)


def test_compute_bound_variant() -> None:
    workload = {"flops": 1e12, "bytes": 1e9, "precision": "bf16"}
    roof = annotate(variant(2.0), workload, PEAKS)
    assert roof["intensity"] == pytest.approx(1000)
    assert roof["achieved_tflops"] == pytest.approx(500)
    assert roof["achieved_gbps"] == pytest.approx(500)
    assert roof["bound_tflops"] == pytest.approx(800)
    assert roof["pct_of_bound"] == pytest.approx(62.5)
    assert roof["bound"] == "compute"
    assert roof["ridge_intensity"] == pytest.approx(200)


def test_memory_bound_variant_without_precision_uses_fp32() -> None:
    workload = {"flops": 1e9, "bytes": 1e9, "precision": None}
    roof = annotate(variant(0.5), workload, PEAKS)
    assert roof["peak_precision"] == "fp32"
    assert roof["bound_tflops"] == pytest.approx(4.0)
    assert roof["achieved_tflops"] == pytest.approx(2.0)
    assert roof["pct_of_bound"] == pytest.approx(50)
    assert roof["bound"] == "memory"


def test_pure_data_movement_is_judged_against_bandwidth() -> None:
    roof = annotate(variant(1.0), {"flops": 0, "bytes": 2e9}, PEAKS)
    assert roof["achieved_gbps"] == pytest.approx(2000)
    assert roof["pct_of_bound"] == pytest.approx(50)
    assert roof["bound"] == "memory"
    assert roof["intensity"] is None and roof["achieved_tflops"] is None


def test_flops_without_bytes_is_judged_against_compute() -> None:
    roof = annotate(variant(1.0), {"flops": 25e9, "bytes": 0, "precision": "fp32"}, PEAKS)
    assert roof["bound"] == "compute"
    assert roof["pct_of_bound"] == pytest.approx(50)


def test_nothing_declared_or_not_timed_gives_none() -> None:
    assert annotate(variant(1.0), {"flops": 0, "bytes": 0}, PEAKS) is None
    assert annotate({"name": "v", "summary": None}, {"flops": 1, "bytes": 1}, PEAKS) is None


def test_precision_without_a_measured_roof_falls_back_to_fp32() -> None:
    assert peak_compute(PEAKS, "fp8") == ("fp32", 50.0)
    assert peak_compute(PEAKS, "exact") == ("fp32", 50.0)
    assert peak_compute(PEAKS, "bf16") == ("bf16", 800.0)
    with pytest.raises(KeyError):
        peak_compute({"measurements": {}}, "fp32")


def _result(target: str, flops: float, nbytes: float, base_ms: float, opt_ms: float | None) -> dict:
    best = [{"name": "optimized", "summary": {"median": opt_ms}}] if opt_ms else []
    return {"target": target, "workload": {"flops": flops, "bytes": nbytes, "precision": "bf16"},
            "baseline": {"name": "baseline", "summary": {"median": base_ms}}, "variants": best,
            "best": "optimized" if opt_ms else None}


def test_pair_points_keep_only_pairs_with_flops_bytes_and_both_timings() -> None:
    results = [_result("ch01:a", 1e12, 1e9, 4.0, 2.0), _result("ch01:b", 0, 1e9, 1.0, 0.5),
               _result("ch01:c", 1e12, 1e9, 4.0, None)]
    points = pair_points(results, PEAKS)
    assert points == [PairPoints("ch01:a", "bf16", 1000.0, 250.0, 500.0)]


def test_plot_has_a_labelled_arrow_per_pair_and_writes_png(tmp_path) -> None:
    points = [PairPoints("ch01:a", "bf16", 1000.0, 250.0, 500.0), PairPoints("ch02:b", "fp32", 2.0, 1.0, 6.0)]
    ax = figure(points, PEAKS).axes[0]
    labels = {t.get_text() for t in ax.texts}
    assert {"ch01:a", "ch02:b"} <= labels
    arrows = [t for t in ax.texts if t.arrow_patch is not None]
    assert len(arrows) == 2
    assert len(ax.get_legend().get_texts()) == 2
    path = plot(points, PEAKS, tmp_path / "sub" / "roof.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_link_without_a_ceiling_here_is_noted_not_fatal() -> None:
    """An NVLink pair's result judged with a 1-GPU machine's peaks: a note, no roofline, no crash."""
    from aisp.report.roofline import add_roofline
    workload = {"flops": 1e9, "bytes": 2e9, "precision": "bf16"}
    assert pair_points([{**_result("ch02:p2p", 1e9, 2e9, 4.0, 1.0), "workload": workload}], PEAKS)
    result = {**_result("ch02:p2p", 1e9, 2e9, 4.0, 1.0), "workload": {**workload, "link": "nvlink"}}
    annotated = add_roofline(result, PEAKS)
    assert any("no roofline" in n and "nvlink" in n for n in annotated["notes"])
    assert "roofline" not in annotated["baseline"] and pair_points([result], PEAKS) == []


def test_a_two_gpu_pair_is_drawn_under_its_own_two_gpu_roof() -> None:
    """Its rates are the whole call's (summed over the ranks), so its roof is 2 x one GPU's."""
    two = {**_result("ch04:tp", 1e12, 1e9, 4.0, 2.0)}
    two["workload"] = {**two["workload"], "requires": {"gpus": 2, "ranks": 1}}
    points = pair_points([_result("ch01:a", 1e12, 1e9, 4.0, 2.0), two], PEAKS)
    assert [p.gpus for p in points] == [1, 2] and points[1].optimized_tflops == pytest.approx(500)
    legend = [t.get_text() for t in figure(points, PEAKS).axes[0].get_legend().get_texts()]
    assert legend == ["bf16: 800 TFLOP/s, 4,000 GB/s", "bf16 on 2 GPUs: 1.6e+03 TFLOP/s, 8,000 GB/s"]


def test_the_dashboard_names_a_multi_gpu_roof() -> None:
    from aisp.report.dashboard.roofline_chart import _roof_traces

    one = annotate(variant(2.0), {"flops": 1e12, "bytes": 1e9, "precision": "bf16"}, PEAKS)
    two = annotate(variant(2.0), {"flops": 1e12, "bytes": 1e9, "precision": "bf16", "requires": {"gpus": 2}}, PEAKS)
    names = [t["name"] for t in _roof_traces([{"base": one}, {"base": two}])]
    assert names == ["roof bf16: 800 TFLOP/s, 4,000 GB/s", "roof bf16 on 2 GPUs: 1.6e+03 TFLOP/s, 8,000 GB/s"]
