"""Results are annotated against the measured roofline; a variant beyond it is flagged."""

from __future__ import annotations

from aisp.report.roofline import add_roofline

PEAKS = {"measurements": {"matmul_fp32": {"value": 50.0}, "memory_copy": {"value": 4000.0}}}


def _result(opt_ms: float) -> dict:
    def var(name, ms):
        return {"name": name, "summary": {"median": ms}}
    # 1 GFLOP over 1 MB: intensity 1000 FLOP/byte, compute-bound at 50 TFLOP/s -> 0.02 ms floor.
    return {"workload": {"flops": 1e9, "bytes": 1e6, "precision": "fp32"},
            "baseline": var("baseline_x", 0.2), "variants": [var("optimized_x", opt_ms)], "notes": []}


def test_variants_get_roofline_numbers():
    out = add_roofline(_result(0.04), PEAKS)
    roof = out["variants"][0]["roofline"]
    assert roof["bound"] == "compute" and abs(roof["pct_of_bound"] - 50.0) < 1e-6
    assert abs(out["baseline"]["roofline"]["achieved_tflops"] - 5.0) < 1e-9
    assert out["notes"] == []


def test_faster_than_the_ceiling_is_flagged():
    out = add_roofline(_result(0.01), PEAKS)
    assert any("200% of the measured roofline bound" in n for n in out["notes"])


def test_no_peaks_no_annotation():
    assert "roofline" not in add_roofline(_result(0.04), None)["variants"][0]


def test_transfer_workloads_are_judged_against_the_copy_link():
    peaks = {"measurements": {**PEAKS["measurements"], "h2d_pinned": {"value": 50.0}}}
    result = _result(0.04)
    result["workload"] = {"bytes": 1e6, "link": "h2d"}
    roof = add_roofline(result, peaks)["variants"][0]["roofline"]
    assert roof["peak_gbps"] == 50.0 and abs(roof["pct_of_bound"] - 50.0) < 1e-6
