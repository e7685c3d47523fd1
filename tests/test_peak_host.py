"""The host ceilings of ``aisp peak`` (aisp/peak/host.py): each probe on this CPU at tiny sizes, the
rates' arithmetic on a stubbed clock, the buffer size against the last-level cache, and ``--only``
(some probes measured and merged into the cached file, the rest kept) and ``--out`` (a measurement
written alone, the cache untouched: what ``bench run --host-peaks`` runs for the launch floors)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from aisp.cli.main import app
from aisp.peak import host
from aisp.peak.measure import measure_peaks, merge_peaks, probe_names, save_peaks
from aisp.peak.probes import PeakConfig

CPU = torch.device("cpu")
TINY = PeakConfig(repeats=2, host_bytes=4 << 20, first_touch_bytes=4 << 20, compile=False)
HOST_PROBES = ("host_memory", "page_cache", "first_touch", "dispatch")


def _positive_rates(found: dict) -> None:
    for name, m in found.items():
        assert m["unit"] == "GB/s" and m["value"] > 0 and m["detail"], (name, m)


def test_the_memory_probe_measures_copy_and_fill_on_the_stated_threads() -> None:
    found = host.memory(TINY)
    assert set(found) == {"host_memory_copy", "host_memory_fill", "host_memory_copy_1thread"}
    _positive_rates(found)
    assert f"on {torch.get_num_threads()} threads" in found["host_memory_copy"]["detail"]
    assert "on 1 thread" in found["host_memory_copy_1thread"]["detail"] and "4 MiB" in found["host_memory_fill"]["detail"]


def test_the_page_cache_probe_reads_its_file_and_removes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AISP_IO_DIR", str(tmp_path))
    found = host.page_cache(TINY)
    _positive_rates(found)
    assert str(tmp_path) in found["page_cache_read"]["detail"] and "1 thread" in found["page_cache_read"]["detail"]
    assert not list(tmp_path.iterdir())


def test_the_first_touch_probe_measures_both_page_sizes_and_keeps_the_faster() -> None:
    found = host.first_touch(TINY)
    assert set(found) == {"first_touch", "first_touch_4k", "first_touch_thp"}
    _positive_rates(found)
    assert found["first_touch"]["value"] == max(found["first_touch_4k"]["value"], found["first_touch_thp"]["value"])
    assert "THP enabled=" in found["first_touch_thp"]["detail"]


def test_rates_follow_from_the_timed_milliseconds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host, "median_ms", lambda fn, device, repeats: 2.0)
    monkeypatch.setenv("AISP_IO_DIR", str(tmp_path))
    nbytes = TINY.host_bytes
    memory = host.memory(TINY)
    assert memory["host_memory_copy"]["value"] == pytest.approx(2 * nbytes / 2e-3 / 1e9)  # read + write
    assert memory["host_memory_fill"]["value"] == pytest.approx(nbytes / 2e-3 / 1e9)  # writes only
    assert host.page_cache(TINY)["page_cache_read"]["value"] == pytest.approx(nbytes / 2e-3 / 1e9)


def test_a_first_touch_is_timed_from_the_map_to_the_end_of_the_memset(monkeypatch: pytest.MonkeyPatch) -> None:
    ticks = iter([10.0, 10.25])  # the clock read before mmap and after memset; the unmap is not timed
    monkeypatch.setattr(host.time, "perf_counter", lambda: next(ticks))
    seconds, _ = host.touch_fresh(1 << 20, host.mmap.MADV_NOHUGEPAGE)
    assert seconds == pytest.approx(0.25)


def test_buffers_are_four_last_level_caches_and_at_least_a_gib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for index, (level, size) in enumerate([(1, "48K"), (2, "2048K"), (3, "491520K")]):
        (tmp_path / f"index{index}").mkdir()
        (tmp_path / f"index{index}" / "level").write_text(f"{level}\n")
        (tmp_path / f"index{index}" / "size").write_text(f"{size}\n")
    assert host.llc_bytes(tmp_path) == 480 << 20
    assert host.llc_bytes(tmp_path / "absent") == 0
    monkeypatch.setattr(host, "llc_bytes", lambda: 480 << 20)
    assert host.host_bytes(PeakConfig()) == 4 * (480 << 20)
    monkeypatch.setattr(host, "llc_bytes", lambda: 32 << 20)
    assert host.host_bytes(PeakConfig()) == 1 << 30
    assert host.host_bytes(TINY) == 4 << 20


def test_measure_peaks_runs_only_the_probes_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AISP_IO_DIR", str(tmp_path))
    peaks = measure_peaks(TINY, CPU, only=HOST_PROBES)
    assert {"host_memory_copy", "page_cache_read", "first_touch"} <= set(peaks["measurements"])
    assert peaks["latency"]["dispatch_torch_op"]["value"] > 0  # the host's own dispatch floor
    assert "matmul_fp32" not in peaks["measurements"] and peaks["skipped"] == {} and peaks["errors"] == {}
    assert set(HOST_PROBES) <= set(probe_names())
    with pytest.raises(ValueError, match="unknown probe.*host_memroy"):
        measure_peaks(TINY, CPU, only=["host_memroy"])


def test_a_host_probe_that_cannot_write_its_file_is_an_error_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def full(cfg: PeakConfig) -> dict:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(host, "page_cache", full)
    peaks = measure_peaks(TINY, CPU, only=["page_cache", "host_memory"])
    assert peaks["errors"] == {"page_cache": "OSError: [Errno 28] No space left on device"}
    assert "host_memory_copy" in peaks["measurements"]


def _gpu_doc() -> dict:
    return {"measurements": {"matmul_bf16": {"value": 780.0, "unit": "TFLOP/s", "detail": "x"}},
            "latency": {"launch_eager": {"value": 5.8, "unit": "us", "detail": "x"}},
            "skipped": {"first_touch": "an older reason", "p2p_copy": "needs 2 GPUs"}, "errors": {},
            "provenance": {"hardware_key": "h999", "date": "2026-11-22", "cpu_count": 16}}


def test_a_merge_keeps_the_old_figures_and_says_what_was_remeasured() -> None:
    fresh = {"measurements": {"host_memory_copy": {"value": 60.0, "unit": "GB/s", "detail": "y"}}, "latency": {},
             "skipped": {}, "errors": {"page_cache": "OSError: disk full"},
             "provenance": {"hardware_key": "h999", "date": "2026-12-01", "cpu_count": 64}}
    merged = merge_peaks({**_gpu_doc(), "source": "/x"}, fresh, ["host_memory", "page_cache", "first_touch"])
    assert merged["measurements"]["matmul_bf16"]["value"] == 780.0 and merged["latency"]["launch_eager"]["value"] == 5.8
    assert merged["measurements"]["host_memory_copy"]["value"] == 60.0
    assert merged["skipped"] == {"p2p_copy": "needs 2 GPUs"} and merged["errors"] == {"page_cache": "OSError: disk full"}
    assert merged["provenance"]["date"] == "2026-11-22" and "source" not in merged
    assert merged["provenance"]["remeasured"]["host_memory"] == {
        "date": "2026-12-01", "cpu_model": None, "cpu_count": 64, "gpu_name": None, "gpu_count": None,
        "torch": None, "git_commit": None}


@pytest.fixture
def peak_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AISP_PEAK_DIR", str(tmp_path))
    monkeypatch.setattr("aisp.harness.environment.hardware_key", lambda: "h999")
    return tmp_path


def test_cli_only_merges_into_the_cached_file(peak_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    save_peaks(_gpu_doc())
    asked = []

    def measured(cfg, progress, only=None) -> dict:
        asked.append(only)
        return {"measurements": {"first_touch": {"value": 6.0, "unit": "GB/s", "detail": "y"}}, "latency": {},
                "skipped": {}, "errors": {}, "provenance": {"hardware_key": "h999", "date": "2026-12-01"}}

    monkeypatch.setattr("aisp.peak.measure.measure_peaks", measured)
    out = CliRunner().invoke(app, ["peak", "--only", "first_touch", "--json"])
    assert out.exit_code == 0, out.output
    assert asked == [["first_touch"]]
    stored = json.loads((peak_dir / "peak_h999.json").read_text())
    assert stored["measurements"]["first_touch"]["value"] == 6.0 and stored["measurements"]["matmul_bf16"]["value"] == 780.0
    assert "first_touch" not in stored["skipped"] and stored["provenance"]["remeasured"]["first_touch"]["date"] == "2026-12-01"


def test_cli_only_fails_on_an_unknown_probe_or_without_a_cached_file(peak_dir: Path) -> None:
    unknown = CliRunner().invoke(app, ["peak", "--only", "host_memory,pagecache"])
    assert unknown.exit_code == 2 and "unknown probe(s) pagecache" in unknown.stderr
    missing = CliRunner().invoke(app, ["peak", "--only", "host_memory"])
    assert missing.exit_code == 2 and "no cached peaks for h999" in missing.stderr
    assert not list(peak_dir.iterdir())


def test_cli_out_writes_the_measurement_alone_and_leaves_the_cache(peak_dir: Path, tmp_path: Path) -> None:
    """``--only dispatch --out FILE`` measures on this CPU and writes that document to FILE; no cached
    peaks are needed (--only alone would exit 2 here) and none are written."""
    out_file = tmp_path / "measured" / "floors.json"
    out = CliRunner().invoke(app, ["peak", "--only", "dispatch", "--out", str(out_file)])
    assert out.exit_code == 0, out.output
    written = json.loads(out_file.read_text())
    assert written["latency"]["dispatch_torch_op"]["value"] > 0 and written["measurements"] == {}
    assert written["provenance"]["hardware_key"] == "cpu" and "remeasured" not in written["provenance"]
    assert [p.name for p in peak_dir.iterdir()] == ["measured"]  # no peak_h999.json
