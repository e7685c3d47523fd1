"""SIMT precisions: ``fp32_simt`` / ``fp16_simt`` priced at ``aisp peak``'s CUDA-core FMA rates, never at a
matmul peak; a missing SIMT figure asks for ``aisp peak``; an unknown precision is an error naming it
(at load, in the roofline and in the ceilings report); and the pairs that declare a SIMT precision,
each priced from a fixture peaks document."""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import pytest
import torch
from conftest import REPO
from typer.testing import CliRunner

from aisp import Workload
from aisp.cli.main import app
from aisp.harness.execute import workload_dict
from aisp.harness.loader import load_benchmark
from aisp.harness.tolerance import TOLERANCES, tolerance
from aisp.report.ceilings import MissingPeak, add_ceiling, bounds, rows
from aisp.report.roofline import SIMT_PEAKS, UnknownLink, UnknownPrecision, annotate, peak_compute
from tests.synthetic_runs import pair, samples, variant, write_run

FIGURES = {"matmul_fp32": 50.0, "matmul_fp16": 800.0, "matmul_bf16": 800.0, "simt_fp32": 64.0,
           "simt_fp16": 128.0, "memory_copy": 4000.0}
"""Round figures: TFLOP/s, and GB/s for the copy."""


def peaks(**drop: bool) -> dict[str, Any]:
    kept = {k: v for k, v in FIGURES.items() if not drop.get(k)}
    return {"measurements": {k: {"value": v} for k, v in kept.items()}, "provenance": {"hardware_key": "h999"}}


def timed(ms: float) -> dict:
    return {"name": "optimized_x", "summary": {"median": ms}}


@pytest.mark.parametrize(("precision", "figure"), [("fp32_simt", "simt_fp32"), ("fp16_simt", "simt_fp16")])
def test_a_simt_precision_is_priced_at_its_fma_rate(precision: str, figure: str) -> None:
    assert SIMT_PEAKS[precision] == figure
    assert peak_compute(peaks(), precision) == (precision, FIGURES[figure])
    found = bounds({"flops": 1.28e12, "precision": precision}, peaks())[0]
    assert found.value == FIGURES[figure] and found.detail == f"1.28e+12 FLOP at the {precision} peak"


def test_fp16_simt_is_not_the_fp16_tensor_peak() -> None:
    workload = {"flops": 1.28e12, "bytes": 1e9, "precision": "fp16_simt"}  # 10 ms at 128 TFLOP/s, 0.25 ms of HBM
    roof = annotate(timed(20.0), workload, peaks())
    assert roof["bound"] == "compute" and roof["peak_tflops"] == 128.0 and roof["pct_of_bound"] == pytest.approx(50)
    tensor = annotate(timed(20.0), {**workload, "precision": "fp16"}, peaks())
    assert tensor["pct_of_bound"] == pytest.approx(100 * 64 / 800)


@pytest.mark.parametrize("figure", ["simt_fp32", "simt_fp16"])
def test_a_missing_simt_figure_asks_for_aisp_peak_and_falls_back_to_nothing(figure: str) -> None:
    precision = next(p for p, f in SIMT_PEAKS.items() if f == figure)
    lacking = peaks(**{figure: True})
    with pytest.raises(KeyError, match=f"no {figure} ceiling.*aisp peak --refresh"):
        peak_compute(lacking, precision)
    with pytest.raises(MissingPeak, match=figure):
        bounds({"flops": 1e12, "precision": precision}, lacking)
    result = pair("ch08:x", variant("baseline", samples(2.0, 0.01)), [variant("optimized_x", samples(1.0, 0.01))])
    result["workload"] = {"flops": 1e12, "bytes": 1e9, "precision": precision}
    assert f"no {figure} ceiling" in add_ceiling(result, lacking)["no_ceiling"]


def test_a_known_precision_without_its_matmul_figure_still_falls_back_to_fp32() -> None:
    assert peak_compute(peaks(matmul_fp16=True), "fp16") == ("fp32", 50.0)  # a CPU measures fp32 only
    assert peak_compute(peaks(), "exact") == ("fp32", 50.0)


def test_an_unknown_precision_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match="precision is 'fp16simt'"):
        Workload(flops=1.0, precision="fp16simt")  # type: ignore[arg-type]
    with pytest.raises(UnknownPrecision, match="unknown precision 'fp16simt'"):
        peak_compute(peaks(), "fp16simt")
    with pytest.raises(UnknownPrecision, match="'fp16simt'"):  # not priced as fp32, nor taken for a missing peak
        bounds({"flops": 1e9, "precision": "fp16simt"}, peaks())
    assert not issubclass(UnknownPrecision, KeyError) and not issubclass(UnknownPrecision, UnknownLink)


def _result(target: str, precision: str) -> dict:
    result = pair(target, variant("baseline", samples(2.0, 0.01)), [variant("optimized", samples(1.0, 0.01))])
    result["workload"] = {"flops": 1e12, "precision": precision, "latency": None}
    return result


def test_the_report_names_the_pair_with_an_unknown_precision(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UnknownPrecision, match="^ch08:y: unknown precision 'f16'"):
        rows([_result("ch08:x", "fp16_simt"), _result("ch08:y", "f16")], peaks())
    monkeypatch.setenv("AISP_PEAK_DIR", str(tmp_path / "peaks"))
    (tmp_path / "peaks").mkdir()
    (tmp_path / "peaks" / "peak_cpu.json").write_text(json.dumps({**peaks(), "provenance": {"hardware_key": "cpu"}}))
    run = write_run(tmp_path, "run1", [_result("ch08:y", "f16")])
    out = CliRunner().invoke(app, ["report", "ceilings", str(run)])
    assert out.exit_code == 2 and "ch08:y: unknown precision 'f16'" in out.stderr


@pytest.mark.parametrize(("precision", "number_format"), [("fp32_simt", "fp32"), ("fp16_simt", "fp16")])
def test_a_simt_precision_verifies_at_its_number_formats_tolerance(precision: str, number_format: str) -> None:
    assert tolerance(Workload(precision=precision), torch.float32) == TOLERANCES[number_format]  # type: ignore[arg-type]


CHANGED = {"ch08:half2_math": "fp16_simt", "ch08:loop_unrolling": "fp32_simt", "ch08:predication": "fp32_simt",
           "ch08:tail_effect": "fp32_simt", "ch06:ilp_accumulators": "fp32_simt", "ch06:launch_bounds": "fp32_simt",
           "ch07:tiled_matmul": "fp32_simt"}
"""Pairs whose FLOPs are CUDA-core FMA chains by their lesson, and the SIMT precision each declares."""
BITWISE = ("ch08:loop_unrolling", "ch08:predication", "ch08:tail_effect")
"""Of them, the bitwise-equal pairs that declared "exact": still no difference allowed."""


def workload_of(target: str) -> dict[str, Any]:
    chapter, name = target.split(":")
    try:
        return workload_dict(load_benchmark(REPO / chapter / f"baseline_{name}.py").workload)
    except ModuleNotFoundError as missing:
        if importlib.util.find_spec(missing.name or "") is not None:
            raise
        pytest.skip(f"{target} imports {missing.name}, not installed here")


@pytest.mark.parametrize("target", sorted(CHANGED))
def test_each_changed_pair_is_priced_at_its_simt_rate(target: str) -> None:
    workload = workload_of(target)
    precision = CHANGED[target]
    assert workload["precision"] == precision
    result = _result(target, precision)
    result["workload"] = workload
    flop_s = workload["flops"] / (FIGURES[SIMT_PEAKS[precision]] * 1e12)
    byte_s = workload["bytes"] / (FIGURES["memory_copy"] * 1e9)
    [row] = rows([result], peaks())
    assert row.kind == ("compute" if flop_s > byte_s else "memory")
    assert row.percent == pytest.approx(100 * max(flop_s, byte_s) / 1e-3, rel=0.05)  # the best runs ~1 ms
    if target in BITWISE:
        assert (workload["element_tol"], workload["rtol"], workload["max_rel_l2"]) == (0.0, 0.0, 0.0)
