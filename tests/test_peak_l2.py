"""The L2 bandwidth ceiling: ``aisp peak``'s ``l2_bandwidth`` probe (aisp/peak/l2.py), its buffer and byte
accounting on synthetic timings, its skip on a CPU and its selection with ``--only``; the link ``l2``
priced at it (N x for N GPUs); a pair over ``l2`` without the figure listed as "no ceiling" with the
figure to measure, in ``aisp report ceilings`` too; on a GPU, L2 above the HBM copy rate."""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from conftest import REPO
from typer.testing import CliRunner

from aisp import Workload
from aisp.cli.main import app
from aisp.harness.execute import workload_dict
from aisp.harness.loader import import_module_at, load_benchmark
from aisp.peak import l2
from aisp.peak.measure import measure_peaks, probe_names, save_peaks
from aisp.peak.probes import FULL, QUICK, PeakConfig
from aisp.report.ceilings import add_ceiling, ceiling, rows
from aisp.report.roofline import LINK_PEAKS, add_roofline, annotate, link_devices, peak_bandwidth
from tests.synthetic_runs import ENV, pair, samples, variant, write_run

MIB = 2**20
L2_BLOCKING_BYTES = 8 * 2 * 256 * MIB
"""ch02:l2_blocking: 8 passes, each reading and writing the 256 MiB tensor."""


def peaks(l2_gbps: float | None = 8000.0, key: str = "h999") -> dict[str, Any]:
    measured = {"matmul_fp32": 50.0, "memory_copy": 4000.0, **({"l2_bandwidth": l2_gbps} if l2_gbps else {})}
    return {"measurements": {k: {"value": v, "unit": "GB/s", "detail": ""} for k, v in measured.items()},
            "latency": {}, "skipped": {}, "errors": {}, "provenance": {"hardware_key": key}}


# --- the probe's arithmetic

def test_the_buffer_is_a_quarter_of_l2_as_the_pairs_chunk() -> None:
    opt = import_module_at(REPO / "ch02" / "optimized_l2_blocking.py")
    for cache in (60 * MIB, 50 * MIB, 40 * MIB):  # H200 and H100 as PyTorch reports them, A100
        assert l2.buffer_bytes(cache) == opt.chunk_elements(cache) * 4
    assert l2.buffer_bytes(60 * MIB) == 15 * MIB
    assert l2.buffer_bytes(1000) == 4096  # one block of 1,024 fp32 at least


def test_the_figure_counts_read_and_write_per_pass_at_the_best_replay() -> None:
    found = l2.l2_figure(15 * MIB, 256, [2.0, 1.0, 1.5], 2, "in-place x.mul_(-1)")
    assert found["unit"] == "GB/s"
    assert found["value"] == pytest.approx(2 * 15 * MIB * 256 / 1e-3 / 1e9)  # 8,053 GB/s: 7.5 GiB in 1 ms
    assert found["detail"] == "in-place x.mul_(-1): 256 passes over 15 MiB in one CUDA graph, best of 3 replays"
    read = l2.l2_figure(15 * MIB, 256, [1.0], 1, "torch.sum(x)")
    assert read["value"] == pytest.approx(found["value"] / 2)


def test_the_probe_times_one_replay_of_every_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe on synthetic timings: a 60 MiB L2, a graph of ``l2_passes`` passes a replay, read+write
    counted for the in-place passes, reads for the sums (no GPU: its CUDA calls are stubbed)."""
    captured = []

    def graph(device: torch.device, work, passes: int) -> SimpleNamespace:
        work()  # the pass itself runs (on the CPU here)
        captured.append(passes)
        return SimpleNamespace(replay=lambda: None)

    replays = iter([[1.2, 1.0, 1.1], [0.8, 0.7, 0.9]])
    monkeypatch.setattr(l2, "require_gpu", lambda device, what: None)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: SimpleNamespace(L2_cache_size=60 * MIB))
    monkeypatch.setattr(torch.cuda, "device", lambda device: nullcontext())
    monkeypatch.setattr(l2, "captured_graph", graph)
    monkeypatch.setattr(l2, "timed_ms", lambda fn, device, repeats: next(replays))
    found = l2.l2_bandwidth(PeakConfig(l2_passes=100, repeats=3), torch.device("cpu"))
    assert captured == [100, 100]
    assert found["l2_bandwidth"]["value"] == pytest.approx(2 * 15 * MIB * 100 / 1.0e-3 / 1e9)
    assert found["l2_bandwidth_read"]["value"] == pytest.approx(15 * MIB * 100 / 0.7e-3 / 1e9)
    assert "buffer 1/4 of the 60 MiB L2: 100 passes over 15 MiB" in found["l2_bandwidth"]["detail"]
    assert "read+write counted" in found["l2_bandwidth"]["detail"]


def test_the_pass_counts_of_a_full_and_a_quick_measurement() -> None:
    assert FULL.l2_passes == 256 and QUICK.l2_passes == 64


# --- on a CPU: skipped, and selectable by name

def test_skipped_with_the_reason_on_a_cpu() -> None:
    found = measure_peaks(PeakConfig(repeats=2, compile=False), torch.device("cpu"), only=["l2_bandwidth"])
    assert found["measurements"] == {} and found["errors"] == {}
    assert found["skipped"] == {"l2_bandwidth": "no GPU: the L2 bandwidth is a GPU figure"}
    assert "l2_bandwidth" in probe_names()


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CPU's skip line; on a GPU the figure is measured")
def test_cli_only_l2_bandwidth_merges_into_the_cached_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AISP_PEAK_DIR", str(tmp_path))
    monkeypatch.setattr("aisp.harness.environment.hardware_key", lambda: "h999")
    save_peaks(peaks(None))
    out = CliRunner().invoke(app, ["peak", "--only", "l2_bandwidth"])
    assert out.exit_code == 0, out.output
    stored = json.loads((tmp_path / "peak_h999.json").read_text())
    assert stored["skipped"]["l2_bandwidth"].startswith("no GPU") and stored["measurements"]["memory_copy"]
    assert "l2_bandwidth" in stored["provenance"]["remeasured"]


# --- the link

def test_the_l2_link_is_priced_at_the_l2_figure() -> None:
    assert LINK_PEAKS["l2"] == "l2_bandwidth" and Workload(link="l2").link == "l2"
    assert peak_bandwidth(peaks(), "l2") == 8000.0
    found = ceiling({"name": "o", "summary": {"median": 1.0}}, {"bytes": L2_BLOCKING_BYTES, "link": "l2"}, peaks())
    assert found["kind"] == "memory" and found["value"] == 8000.0
    assert found["time_ms"] == pytest.approx(L2_BLOCKING_BYTES / 8e12 * 1e3)  # 0.537 ms
    assert found["percent"] == pytest.approx(100 * L2_BLOCKING_BYTES / 8e12 / 1e-3)
    assert found["detail"] == "4.29e+09 B at the l2 peak"
    roof = annotate({"name": "o", "summary": {"median": 1.0}}, {"bytes": L2_BLOCKING_BYTES, "link": "l2"}, peaks())
    assert roof["peak_gbps"] == 8000.0 and roof["bound"] == "memory"


def test_each_gpu_has_its_own_l2() -> None:
    two = {"bytes": 1e9, "link": "l2", "requires": {"gpus": 2, "ranks": 1}}
    assert link_devices(two, peaks(key="2x_h999"), "l2") == 2
    found = ceiling({"name": "o", "summary": {"median": 1.0}}, two, peaks(key="2x_h999"))
    assert found["value"] == 16000.0 and found["detail"] == "1e+09 B at 2 x the l2 peak"
    assert link_devices(two, peaks(key="cpu"), "l2") == 1  # a CPU's peaks are the host's, not per GPU


def test_an_unknown_link_spelled_like_l2_is_an_error_at_load() -> None:
    with pytest.raises(ValueError, match="link is 'L2'"):
        Workload(link="L2")  # type: ignore[arg-type]


# --- without a measured l2_bandwidth: no ceiling, with the figure to measure

def _l2_result(workload: dict[str, Any], target: str = "ch02:l2_blocking") -> dict[str, Any]:
    result = pair(target, variant("baseline_l2_blocking", samples(1.047, 0.01)),
                  [variant("optimized_l2_blocking", samples(0.914, 0.01))])
    result["workload"] = workload
    return result


def _ch02_workload() -> dict[str, Any]:
    return workload_dict(load_benchmark(REPO / "ch02" / "baseline_l2_blocking.py").workload)


def test_a_missing_l2_figure_is_no_ceiling_with_the_reason() -> None:
    result = _l2_result({"bytes": L2_BLOCKING_BYTES, "link": "l2", "ceiling_note": "a note"})
    out = add_ceiling(result, peaks(None))
    assert "no l2_bandwidth ceiling for link 'l2'" in out["no_ceiling"] and "aisp peak" in out["no_ceiling"]
    assert "ceiling" not in out
    [row] = rows([result], peaks(None))
    assert row.kind == "none" and row.percent is None and "l2_bandwidth" in row.reason
    assert any(n.startswith("no roofline: the peaks hold no l2_bandwidth") for n in add_roofline(result, peaks(None))["notes"])


def test_the_committed_h200_peaks_price_ch02_or_say_what_to_run() -> None:
    committed = json.loads((REPO / "peaks" / "peak_h200.json").read_text())
    out = add_ceiling(_l2_result(_ch02_workload()), committed)
    if "l2_bandwidth" in committed["measurements"]:
        assert out["ceiling"]["detail"] == "4.29e+09 B at the l2 peak"
    else:
        assert "no l2_bandwidth ceiling for link 'l2'" in out["no_ceiling"]


H200 = {**ENV, "hardware_key": "h200", "gpu_name": "NVIDIA H200", "gpu_count": 1}


def _report(run: Path, *options: str) -> str:
    out = CliRunner().invoke(app, ["report", "ceilings", str(run), *options])
    assert out.exit_code == 0, out.output
    return " ".join(out.output.split())


def test_cli_report_ceilings_lists_the_pair_without_and_with_the_figure(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The H200's peaks as committed, less any l2_bandwidth: ch02:l2_blocking (as its file declares it
    now) is listed without a ceiling and the reason; with a figure it reads its % of L2."""
    monkeypatch.setenv("AISP_PEAK_DIR", str(tmp_path / "peaks"))
    monkeypatch.setenv("COLUMNS", "250")
    h200 = json.loads((REPO / "peaks" / "peak_h200.json").read_text())
    h200["measurements"].pop("l2_bandwidth", None)
    save_peaks(h200, tmp_path / "peaks")
    result = _l2_result(_ch02_workload())
    run = write_run(tmp_path, "run1", [result], env=H200)
    shown = _report(run)
    assert "ch02:l2_blocking │ none" in shown and "no l2_bandwidth ceiling for link 'l2'" in shown
    assert "1 pairs: 0 at >= 80% of their ceiling, 0 below" in shown and "1 without a ceiling" in shown

    h200["measurements"]["l2_bandwidth"] = {"value": 8000.0, "unit": "GB/s", "detail": "synthetic"}
    save_peaks(h200, tmp_path / "peaks")
    [row] = rows([result], h200)
    assert row.kind == "memory" and row.percent == pytest.approx(100 * L2_BLOCKING_BYTES / 8e12 / 0.914e-3, rel=0.02)
    assert f"ch02:l2_blocking │ memory │ {row.percent:.0f}%" in _report(run)


def test_cli_current_workloads_moves_an_old_run_to_the_l2_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that stored the old declaration (512 MiB over HBM) keeps it; --current-workloads judges its
    times against the file's 4 GiB over L2, which these peaks cannot price yet."""
    monkeypatch.setenv("AISP_PEAK_DIR", str(tmp_path / "peaks"))
    monkeypatch.setenv("COLUMNS", "250")
    save_peaks(peaks(None, key="h200"), tmp_path / "peaks")
    old = _l2_result({"bytes": 2.0 * 4 * 64 * MIB, "link": "hbm", "ceiling_note": "L2 binds, not HBM"})
    run = write_run(tmp_path, "run1", [old], env=H200)
    assert "ch02:l2_blocking │ memory" in _report(run)
    current = _report(run, "--current-workloads")
    assert "ch02:l2_blocking │ none" in current and "no l2_bandwidth ceiling for link 'l2'" in current


# --- on a GPU: L2 must beat HBM

@pytest.mark.gpu
def test_l2_outruns_the_hbm_copy_on_the_gpu() -> None:
    found = measure_peaks(PeakConfig(repeats=5, compile=False), torch.device("cuda", 0),
                          only=["memory_copy", "l2_bandwidth"])
    assert found["errors"] == {} and found["skipped"] == {}
    m = found["measurements"]
    print(json.dumps({k: m[k] for k in ("memory_copy", "l2_bandwidth", "l2_bandwidth_read")}, indent=1))
    assert m["l2_bandwidth"]["value"] > m["memory_copy"]["value"] > 0
    assert m["l2_bandwidth_read"]["value"] > 0 and m["l2_bandwidth"]["unit"] == "GB/s"
    assert f"{torch.cuda.get_device_properties(0).L2_cache_size / MIB:g} MiB L2" in m["l2_bandwidth"]["detail"]
