"""``aisp bench run --host-peaks``: the host's own memory, page-cache, first-touch and dispatch figures are
measured before the pairs run, priced into the host links' ceilings instead of the cached figures
(which may come from another host with the same GPUs), kept in the run folder, reused by a resumed
run and by ``aisp report ceilings``. The measurement is faked here: only where the figures go is tested."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from aisp import suite
from aisp.cli.main import app
from aisp.harness.options import RunOptions
from aisp.harness.runner import Reporter
from aisp.peak.measure import HOST_PROBES, RUN_HOST_PEAKS, with_host

PAIR = '''"""A host-bound fixture: the page cache is its link."""
import torch

import aisp


class Copy(aisp.Benchmark):
    workload = aisp.Workload(bytes=4e6, link="page_cache", no_inputs_reason="a fixture")
    inputs = ()

    def setup(self):
        self.x = torch.ones(1_000_000)

    def run(self):
        return self.x * 2


def get_benchmark():
    return Copy()
'''


def doc(page_cache: float, **gpu: float) -> dict:
    measured = {"page_cache_read": page_cache, **gpu}
    return {"measurements": {k: {"value": v} for k, v in measured.items()}, "latency": {}, "skipped": {}, "errors": {},
            "provenance": {"hardware_key": "h999", "date": "then", "cpu_model": "another host"}}


CACHED = doc(1.0, memory_copy=4000.0, matmul_fp32=50.0)
"""The cached peaks: another host's page cache (1 GB/s) beside the GPU's figures."""
HERE = {**doc(9.0), "provenance": {"date": "now", "cpu_model": "this host"}}
"""This host's figures, as the faked measurement returns them."""


def test_the_dispatch_floor_is_the_run_hosts_too():
    """A pair priced by its torch op dispatches (``dispatches``) is priced at the run host's own
    dispatch figure: hosts with the same GPUs dispatch at 3.45-5.76 us an op (the cached H200 files)."""
    from aisp.report.ceilings import bounds

    def with_dispatch(peaks: dict, us: float) -> dict:
        return {**peaks, "latency": {"dispatch_torch_op": {"value": us, "unit": "us"}}}
    merged = with_host(with_dispatch(CACHED, 4.0), with_dispatch(HERE, 8.0))
    assert "dispatch" in HOST_PROBES and merged["provenance"]["remeasured"]["dispatch"]["cpu_model"] == "this host"
    (bound,) = bounds({"latency": {"dispatches": 100}}, merged)
    assert bound.kind == "latency" and bound.seconds == pytest.approx(100 * 8.0e-6)
    (cached,) = bounds({"latency": {"dispatches": 100}}, with_dispatch(CACHED, 4.0))
    assert cached.seconds == pytest.approx(100 * 4.0e-6)


def test_the_run_figures_replace_only_the_host_ones():
    merged = with_host(CACHED, HERE)
    assert merged["measurements"]["page_cache_read"]["value"] == 9.0
    assert merged["measurements"]["memory_copy"]["value"] == 4000.0
    assert set(merged["provenance"]["remeasured"]) == set(HOST_PROBES)
    assert merged["provenance"]["remeasured"]["page_cache"]["cpu_model"] == "this host"
    assert CACHED["measurements"]["page_cache_read"]["value"] == 1.0  # the cached document is not changed
    assert with_host(None, HERE) is None and with_host(CACHED, None) is CACHED


@pytest.fixture
def host_run(tmp_path, monkeypatch):
    """A one-pair CPU run with --host-peaks, the measurement faked (counted) and the cached peaks given."""
    folder = tmp_path / "hostfx"
    folder.mkdir()
    for side in ("baseline", "optimized"):
        (folder / f"{side}_copy.py").write_text(PAIR)
    measured = []
    monkeypatch.setattr(suite, "measure_host", lambda: measured.append(1) or HERE)
    monkeypatch.setattr(suite, "load_peaks", lambda key: CACHED)
    options = RunOptions(iterations=3, warmup=1, warmup_s=0, device="cpu", artifacts_dir=tmp_path / "art",
                         host_peaks=True)
    suite.run(["hostfx:copy"], (folder,), options, reporter=Reporter())
    (run_dir,) = (tmp_path / "art").iterdir()
    return run_dir, measured


def test_a_host_link_is_priced_at_the_run_hosts_figure(host_run):
    run_dir, measured = host_run
    (result,) = json.loads((run_dir / "summary.json").read_text())["results"]
    assert measured == [1]
    assert result["ceiling"]["value"] == 9.0 and result["ceiling"]["detail"] == "4e+06 B at the page_cache peak"
    kept = json.loads((run_dir / RUN_HOST_PEAKS).read_text())
    assert {k: v for k, v in kept.items() if k != "schema_version"} == HERE


def test_a_resumed_run_reuses_its_figures_without_measuring_again(host_run):
    run_dir, measured = host_run
    assert suite.resume(run_dir, [], (), {}, reporter=Reporter()) == 0
    assert measured == [1]


def test_the_ceilings_report_prices_the_run_at_its_own_host(host_run, monkeypatch):
    """``aisp report ceilings RUN`` recomputes each ceiling from peaks: with the run's own host figures
    (9 GB/s) the pair reaches a ninth of what the cached host's (1 GB/s) would give it."""
    from aisp.cli.report import _run_results
    from aisp.report.ceilings import rows

    run_dir, _ = host_run
    monkeypatch.setattr("aisp.peak.measure.load_peaks", lambda key: CACHED)
    (own,) = rows(*_run_results(run_dir, False, False, {})[::2])
    (run_dir / RUN_HOST_PEAKS).unlink()
    (cached,) = rows(*_run_results(run_dir, False, False, {})[::2])
    assert own.kind == cached.kind == "memory"
    assert cached.percent == pytest.approx(9 * own.percent)
    shown = CliRunner().invoke(app, ["report", "ceilings", str(run_dir)], env={"COLUMNS": "200"})
    assert shown.exit_code == 0 and "hostfx:copy" in shown.output


def test_the_ceilings_report_names_a_key_without_cached_peaks_beside_the_run_figures(host_run, monkeypatch):
    """No cached peaks for the run's key: the run's host figures alone do not make a peaks document;
    the report says which key has none and shows the ceilings stored in the run."""
    run_dir, _ = host_run
    monkeypatch.setattr("aisp.peak.measure.load_peaks", lambda key: None)
    shown = CliRunner().invoke(app, ["report", "ceilings", str(run_dir)], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert "No measured peaks for cpu" in shown.output and "hostfx:copy" in shown.output
