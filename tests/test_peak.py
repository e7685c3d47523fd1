"""Peak measurement on the CPU, its accounting, the cache round trip and lookup order, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from aisp.cli.main import app
from aisp.peak import probes as peak_probes
from aisp.peak.measure import environment_changes, load_peaks, measure_peaks, peak_dirs, save_peaks
from aisp.peak.probes import PeakConfig

CPU = torch.device("cpu")
TINY = PeakConfig(cpu_matmul_n=256, matmul_iters=1, repeats=2, copy_bytes=8 << 20, compile=False, host_bytes=1 << 20,
                  first_touch_bytes=1 << 20)


@pytest.fixture
def peak_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(AISP_PEAK_DIR, repo peaks/ folder), both empty, in a throwaway repo."""
    repo, override = tmp_path / "repo", tmp_path / "override"
    (repo / "peaks").mkdir(parents=True)
    override.mkdir()
    monkeypatch.setenv("AISP_ROOT", str(repo))
    monkeypatch.setenv("AISP_PEAK_DIR", str(override))
    return override, repo / "peaks"


def test_cpu_measures_matmul_and_copy_and_explains_the_rest() -> None:
    peaks = measure_peaks(TINY, CPU)
    m = peaks["measurements"]
    assert m["matmul_fp32"]["value"] > 0 and m["matmul_fp32"]["unit"] == "TFLOP/s"
    assert m["memory_copy"]["value"] > 0 and m["memory_copy"]["unit"] == "GB/s"
    for gpu_only in ("matmul_bf16", "matmul_fp8", "transfers", "launch", "sync", "small_copy", "p2p_copy"):
        assert gpu_only in peaks["skipped"] and peaks["skipped"][gpu_only]
    assert "quick" in peaks["skipped"]["compile"]
    assert peaks["errors"] == {}
    assert peaks["provenance"]["hardware_key"] == "cpu"
    assert peaks["provenance"]["torch"] == torch.__version__


def test_rates_follow_from_the_timed_milliseconds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peak_probes, "median_ms", lambda fn, device, repeats: 2.0)
    peaks = measure_peaks(TINY, CPU)["measurements"]
    assert peaks["matmul_fp32"]["value"] == pytest.approx(2 * 256**3 / 2e-3 / 1e12)
    assert peaks["memory_copy"]["value"] == pytest.approx(2 * (8 << 20) / 2e-3 / 1e9)


def test_a_failing_probe_is_reported_not_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(cfg: PeakConfig, device: torch.device) -> dict:
        raise RuntimeError("out of memory")

    monkeypatch.setattr(peak_probes, "memory_copy", broken)
    peaks = measure_peaks(TINY, CPU)
    assert peaks["errors"]["memory_copy"] == "RuntimeError: out of memory"
    assert "memory_copy" not in peaks["measurements"] and "matmul_fp32" in peaks["measurements"]


def _doc(key: str, value: float) -> dict:
    return {"measurements": {"matmul_fp32": {"value": value, "unit": "TFLOP/s", "detail": "x"}},
            "skipped": {}, "errors": {}, "provenance": {"hardware_key": key}}


def test_cache_round_trip_is_atomic(peak_home: tuple[Path, Path]) -> None:
    override, _ = peak_home
    path = save_peaks(_doc("h999", 12.5))
    assert path == override / "peak_h999.json"
    assert json.loads(path.read_text())["schema_version"] == 1
    assert [p.name for p in override.iterdir()] == ["peak_h999.json"]
    loaded = load_peaks("h999")
    assert loaded["measurements"]["matmul_fp32"]["value"] == 12.5
    assert loaded["source"] == str(path)


def test_lookup_prefers_aisp_peak_dir_then_repo_peaks(peak_home: tuple[Path, Path]) -> None:
    override, repo_peaks = peak_home
    assert peak_dirs() == [override, repo_peaks]
    assert load_peaks("h999") is None
    save_peaks(_doc("h999", 2.0), repo_peaks)
    assert load_peaks("h999")["measurements"]["matmul_fp32"]["value"] == 2.0
    save_peaks(_doc("h999", 1.0), override)
    assert load_peaks("h999")["measurements"]["matmul_fp32"]["value"] == 1.0


def test_cli_quick_measures_and_does_not_cache(peak_home: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's --quick path at TINY's sizes (what is checked does not depend on them: QUICK's took 9.5 s
    against 2.5 on a 2-core host)."""
    override, repo_peaks = peak_home
    monkeypatch.setattr("aisp.peak.measure.QUICK", TINY)
    result = CliRunner().invoke(app, ["peak", "--quick", "--json"])
    assert result.exit_code == 0, result.output
    peaks = json.loads(result.stdout)
    assert peaks["measurements"]["matmul_fp32"]["value"] > 0
    assert not list(override.iterdir()) and not list(repo_peaks.iterdir())


def test_cli_shows_the_cache_and_refresh_remeasures(peak_home: tuple[Path, Path],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    override, _ = peak_home
    monkeypatch.setattr("aisp.harness.environment.hardware_key", lambda: "h999")
    save_peaks(_doc("h999", 123.0))
    shown = CliRunner().invoke(app, ["peak"])
    assert shown.exit_code == 0 and "123.0" in shown.output and "Cached" in shown.output
    assert "different environment" not in shown.output
    monkeypatch.setattr("aisp.peak.measure.measure_peaks", lambda cfg, progress, only=None: _doc("h999", 7.0))
    refreshed = CliRunner().invoke(app, ["peak", "--refresh", "--json"])
    assert refreshed.exit_code == 0, refreshed.output
    assert json.loads(refreshed.stdout)["measurements"]["matmul_fp32"]["value"] == 7.0
    assert load_peaks("h999")["measurements"]["matmul_fp32"]["value"] == 7.0


def test_environment_changes_name_what_differs(monkeypatch: pytest.MonkeyPatch) -> None:
    now = {"gpu_name": "NVIDIA H200", "gpu_count": 1, "driver": "580.1", "cuda": "13.0", "torch": "2.11"}
    monkeypatch.setattr("aisp.peak.measure.manifest", lambda root: now)
    same = {"provenance": dict(now)}
    assert environment_changes(same) == []
    older = {"provenance": {**now, "torch": "2.10"}}
    assert environment_changes(older) == ["torch: 2.10 -> 2.11"]
