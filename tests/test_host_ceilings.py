"""Pairs bound by the host judged against the host's ceilings: the links host_memory, page_cache and
page_faults priced at ``aisp peak``'s host figures, one host's for any world size; an unknown link is
an error naming it, a known one not measured a missing peak; and the bytes each host-bound pair
declares, recomputed here from the shapes its docstring gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from typer.testing import CliRunner

from aisp import Workload
from aisp.cli.main import app
from aisp.harness.benchmark import LINKS
from aisp.harness.execute import workload_dict
from aisp.harness.loader import load_benchmark
from aisp.report.ceilings import MissingPeak, add_ceiling, bounds, ceiling, rows
from aisp.report.roofline import HOST_LINKS, LINK_PEAKS, UnknownLink, annotate, pair_points, peak_bandwidth
from tests.synthetic_runs import pair, samples, variant, write_run

HOST = {"host_memory_copy": 50.0, "page_cache_read": 8.0, "first_touch": 6.0}
"""Round host figures in GB/s (the GPU's beside them: HBM 4,000, H2D 50)."""


def gpu_peaks(gpus: int = 1, host: bool = True) -> dict[str, Any]:
    measured = {"matmul_fp32": 50.0, "matmul_bf16": 800.0, "memory_copy": 4000.0, "h2d_pinned": 50.0,
                **(HOST if host else {})}
    return {"measurements": {k: {"value": v} for k, v in measured.items()},
            "provenance": {"hardware_key": "h999" if gpus == 1 else f"{gpus}x_h999"}}


def timed(ms: float) -> dict:
    return {"name": "optimized_x", "summary": {"median": ms}}


def on(gpus: int, **workload) -> dict:
    return {**workload, "requires": {"gpus": gpus, "ranks": 1}}


# --- the links

def test_every_workload_link_has_a_peak_and_the_host_ones_are_named() -> None:
    assert set(LINKS) == set(LINK_PEAKS)
    assert HOST_LINKS == {"host_memory", "page_cache", "page_faults"}


@pytest.mark.parametrize(("link", "figure"), [("host_memory", "host_memory_copy"), ("page_cache", "page_cache_read"),
                                              ("page_faults", "first_touch")])
def test_a_host_link_is_priced_at_its_host_figure(link: str, figure: str) -> None:
    found = ceiling(timed(1.0), {"bytes": 3e8, "link": link}, gpu_peaks())
    assert found["kind"] == "memory" and found["value"] == HOST[figure]
    assert found["time_ms"] == pytest.approx(3e8 / (HOST[figure] * 1e9) * 1e3)
    assert found["detail"] == f"3e+08 B at the {link} peak"


def test_host_bytes_beside_gpu_flops_take_the_tighter_bound() -> None:
    workload = {"flops": 2e9, "precision": "fp32", "bytes": 1e8, "link": "host_memory"}  # 0.04 ms vs 2 ms
    assert ceiling(timed(4.0), workload, gpu_peaks())["kind"] == "memory"
    assert ceiling(timed(4.0), {**workload, "flops": 2e12}, gpu_peaks())["kind"] == "compute"  # 40 ms


@pytest.mark.parametrize("gpus", [2, 4, 8])
def test_a_host_link_is_shared_by_the_ranks_not_multiplied(gpus: int) -> None:
    host = ceiling(timed(10.0), on(gpus, bytes=1e9, link="host_memory"), gpu_peaks(gpus))
    assert host["value"] == pytest.approx(HOST["host_memory_copy"]) and host["detail"] == "1e+09 B at the host_memory peak"
    assert host["time_ms"] == pytest.approx(1e9 / 50e9 * 1e3)
    hbm = ceiling(timed(10.0), on(gpus, bytes=1e9, link="hbm"), gpu_peaks(gpus))
    assert hbm["value"] == pytest.approx(gpus * 4000.0)  # a GPU link still scales
    roof = annotate(timed(10.0), on(gpus, flops=1e9, precision="fp32", bytes=1e9, link="page_cache"), gpu_peaks(gpus))
    assert roof["peak_gbps"] == pytest.approx(HOST["page_cache_read"]) and roof["peak_tflops"] == pytest.approx(gpus * 50)


def test_an_unknown_link_is_an_error_naming_it() -> None:
    with pytest.raises(UnknownLink, match="unknown link 'host_mem'"):
        peak_bandwidth(gpu_peaks(), "host_mem")
    with pytest.raises(UnknownLink, match="'host_mem'"):  # not priced as HBM, nor taken for a missing peak
        bounds({"bytes": 1e9, "link": "host_mem"}, gpu_peaks())
    assert not issubclass(UnknownLink, KeyError)
    with pytest.raises(ValueError, match="link is 'host_mem'"):
        Workload(bytes=1.0, link="host_mem")


def test_a_known_link_not_measured_is_a_missing_peak() -> None:
    with pytest.raises(MissingPeak, match="no page_cache_read ceiling for link 'page_cache'.*aisp peak --refresh"):
        bounds({"bytes": 1e9, "link": "page_cache"}, gpu_peaks(host=False))


def _result(target: str, link: str) -> dict:
    result = pair(target, variant("baseline", samples(2.0, 0.01)), [variant("optimized", samples(1.0, 0.01))])
    result["workload"] = {"bytes": 1e7, "link": link, "latency": None}
    return result


def test_the_report_names_the_pair_with_an_unknown_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UnknownLink, match="^ch03:y: unknown link 'dram'"):
        rows([_result("ch03:x", "host_memory"), _result("ch03:y", "dram")], gpu_peaks())
    monkeypatch.setenv("AISP_PEAK_DIR", str(tmp_path / "peaks"))
    (tmp_path / "peaks").mkdir()
    (tmp_path / "peaks" / "peak_cpu.json").write_text(json.dumps({**gpu_peaks(), "provenance": {"hardware_key": "cpu"}}))
    run = write_run(tmp_path, "run1", [_result("ch03:y", "dram")])
    out = CliRunner().invoke(app, ["report", "ceilings", str(run)])
    assert out.exit_code == 2 and "ch03:y: unknown link 'dram'" in out.stderr


def test_a_host_link_pair_is_not_a_point_on_the_gpu_roofline() -> None:
    result = _result("ch13:x", "host_memory")
    result["workload"] |= {"flops": 1e9, "precision": "fp32"}
    assert pair_points([result], gpu_peaks()) == []
    result["workload"]["link"] = "hbm"
    assert len(pair_points([result], gpu_peaks())) == 1


def test_the_dashboard_leaves_a_host_link_pair_off_its_roofline(monkeypatch: pytest.MonkeyPatch) -> None:
    from aisp.report.dashboard import roofline_chart
    from aisp.report.dashboard.collect import PairRun, Run

    monkeypatch.setattr(roofline_chart, "load_peaks", lambda key: gpu_peaks())
    host, typo = _result("ch13:x", "host_memory"), _result("ch13:y", "dram")
    for result in (host, typo):
        result["workload"] |= {"flops": 1e9, "precision": "fp32"}
    run = Run(Path("/x"), "r1", "2026-12-01", "h999", {}, [host, typo], False)
    found, left_out = roofline_chart.points([PairRun(run, host), PairRun(run, typo)])
    assert found == [] and left_out == ["ch13:x: its bytes cross the host's host_memory, not a GPU's roofline",
                                        "ch13:y: unknown link 'dram': the links are " + ", ".join(LINK_PEAKS)]


# --- the pairs: bytes one run() must move over the host link, from each pair's shape

F32 = 4
HOST_PAIRS = {
    # a fresh 512 MiB buffer, first-touched once
    "ch03:hugepages": ("page_faults", 512 * 2**20),
    # 2,048 decoded 3 x 128 x 128 fp32 images, each written once and read once
    "ch03:docker": ("host_memory", 2 * 2048 * 3 * 128 * 128 * F32),
    "ch03:numa_unaware": ("host_memory", 2 * 2048 * 3 * 128 * 128 * F32),
    # 4 batches x 32 images: 3 x 256 x 256 uint8 read once, 3 x 224 x 224 fp32 written once
    "ch03:kubernetes": ("host_memory", 4 * 32 * 3 * (256 * 256 + 224 * 224 * F32)),
    # 512 samples cropped to 3 x 80 x 80 fp32, each written once and read once
    "ch13:dataloader_default": ("host_memory", 2 * 512 * 3 * 80 * 80 * F32),
    # 2,048 samples of 16 KiB copied once out of the page cache
    "ch05:packed_shards": ("page_cache", 2048 * 16 * 1024),
}


def workload_of(target: str, variant_prefix: str = "baseline") -> dict[str, Any]:
    chapter, name = target.split(":")
    return workload_dict(load_benchmark(REPO / chapter / f"{variant_prefix}_{name}.py").workload)


@pytest.mark.parametrize("target", sorted(HOST_PAIRS))
def test_the_pair_declares_the_bytes_its_shape_implies(target: str) -> None:
    link, nbytes = HOST_PAIRS[target]
    for side in ("baseline", "optimized"):
        workload = workload_of(target, side)
        assert (workload["link"], workload["bytes"]) == (link, nbytes), f"{target} ({side})"
        assert workload["ceiling_note"], f"{target}: below 80% it must say why"


def test_the_dataloader_keeps_its_gemm_flops_beside_the_host_bytes() -> None:
    workload = workload_of("ch13:dataloader_default")
    assert workload["flops"] == 2 * 512 * (3 * 80 * 80) * 100 and workload["precision"] == "fp32"


@pytest.mark.parametrize("target", sorted(HOST_PAIRS))
def test_the_pair_is_held_to_its_host_figure(target: str) -> None:
    link, nbytes = HOST_PAIRS[target]
    found = ceiling(timed(1e3), workload_of(target), gpu_peaks())
    assert found["kind"] == "memory" and found["time_ms"] == pytest.approx(nbytes / (HOST[LINK_PEAKS[link]] * 1e9) * 1e3)


@pytest.mark.parametrize("target", sorted(HOST_PAIRS))
def test_the_committed_h200_peaks_price_the_pair_or_say_what_to_run(target: str) -> None:
    """Until the H200's host figures are measured (``aisp peak --only host_memory,page_cache,first_touch``
    on an H200), such a pair reads 'no ceiling' with the figure to re-measure, never an HBM %."""
    peaks = json.loads((REPO / "peaks" / "peak_h200.json").read_text())
    link, _ = HOST_PAIRS[target]
    result = _result(target, link)
    result["workload"] = workload_of(target)
    out = add_ceiling(result, peaks)
    if LINK_PEAKS[link] in peaks["measurements"]:
        assert out["ceiling"]["detail"].endswith(f"the {link} peak")
    else:
        assert f"no {LINK_PEAKS[link]} ceiling for link '{link}'" in out["no_ceiling"]
        assert "aisp peak --refresh" in out["no_ceiling"]
