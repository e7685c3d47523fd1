"""``aisp bench run --host-peaks``: the host's own memory, page-cache, first-touch and dispatch figures, and
its launch and sync floors on the run's first GPU (a subprocess), are measured before the pairs run,
priced into the host links' and latency counts' ceilings instead of the cached figures (which may come
from another host with the same GPUs), kept in the run folder, reused by a resumed run and by ``aisp
report ceilings``. The measurements are faked here: only where the figures go is tested."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from aisp import suite
from aisp.cli.main import app
from aisp.harness.options import RunOptions
from aisp.harness.runner import Reporter
from aisp.peak import measure
from aisp.peak.measure import HOST_GPU_PROBES, HOST_PROBES, RUN_HOST_PEAKS, HostGpuFailed, with_host
from aisp.report.ceilings import bounds
from aisp.system.gpu_topology import first_gpu

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


def launch_floors(eager: float, sync: float) -> dict:
    figures = {"launch_eager": eager, "launch_graph": eager / 2, "launch_graph_node": 0.53, "sync_roundtrip": sync}
    return {k: {"value": v, "unit": "us", "detail": "x"} for k, v in figures.items()}


CACHED_FLOORS = {**CACHED, "latency": launch_floors(4.6, 7.9), "skipped": {"launch_dependent": "an older reason"}}
"""The cached peaks with another host's launch (4.6 us) and sync (7.9 us) floors."""
GPU_HERE = {"measurements": {}, "latency": launch_floors(9.0, 13.0), "skipped": {}, "errors": {},
            "provenance": {"date": "now", "cpu_model": "this host", "gpu_name": "NVIDIA H200"}}
"""This host's launch and sync floors, as the faked subprocess returns them."""


def fake_measurements(monkeypatch, gpu: str | None = None, gpu_figures: object = GPU_HERE) -> tuple[list, list]:
    """Both measurements faked and counted (the GPU one with the GPU it was given; ``gpu_figures`` its
    document, or the exception it raises), the cached peaks given; ``gpu``: what ``first_gpu`` names as
    the run's first GPU. Returns the lists the measurements append to."""
    measured, on_gpu = [], []

    def measure_gpu(visible: str) -> dict:
        on_gpu.append(visible)
        if isinstance(gpu_figures, Exception):
            raise gpu_figures
        return gpu_figures

    monkeypatch.setattr(suite, "measure_host", lambda: measured.append(1) or HERE)
    monkeypatch.setattr(measure, "measure_host_gpu", measure_gpu)
    monkeypatch.setattr("aisp.system.gpu_topology.first_gpu", lambda text: gpu)
    monkeypatch.setattr(suite, "load_peaks", lambda key: CACHED)
    return measured, on_gpu


def run_with(tmp_path, monkeypatch, device: str = "cpu", gpu: str | None = None, gpu_figures: object = GPU_HERE):
    """A one-pair CPU run with --host-peaks, the measurements faked (:func:`fake_measurements`)."""
    folder = tmp_path / "hostfx"
    folder.mkdir()
    for side in ("baseline", "optimized"):
        (folder / f"{side}_copy.py").write_text(PAIR)
    measured, on_gpu = fake_measurements(monkeypatch, gpu, gpu_figures)
    options = RunOptions(iterations=3, warmup=1, warmup_s=0, device=device, artifacts_dir=tmp_path / "art",
                         host_peaks=True)
    suite.run(["hostfx:copy"], (folder,), options, reporter=Reporter())  # its exit code is the pair's timing's
    (run_dir,) = (tmp_path / "art").iterdir()
    return run_dir, measured, on_gpu


@pytest.fixture(scope="module")
def host_run(tmp_path_factory):
    """A --host-peaks run on the CPU (--device cpu): the launch floors are not measured. One run for
    the four tests that read it (a worker start each, before): the fakes are undone after it, and a
    test that runs the suite again (the resume) or removes a file of the run puts them back."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        return run_with(tmp_path_factory.mktemp("host_run"), monkeypatch)[:2]


def _kept(run_dir) -> dict:
    return {k: v for k, v in json.loads((run_dir / RUN_HOST_PEAKS).read_text()).items() if k != "schema_version"}


def test_the_launch_floors_are_measured_on_the_runs_first_gpu_and_price_its_launches(tmp_path, monkeypatch, capsys):
    """With a GPU the launch and sync probes run once, on the GPU the run names first, and the run's
    host figures hold them: a ``launches`` count is priced at this host's 9.0 us, not the cached 4.6."""
    run_dir, measured, on_gpu = run_with(tmp_path, monkeypatch, device="auto", gpu="6")
    assert measured == [1] and on_gpu == ["6"]
    kept = _kept(run_dir)
    assert kept["latency"]["launch_eager"]["value"] == 9.0 and kept["latency"]["sync_roundtrip"]["value"] == 13.0
    assert set(kept["provenance"]["remeasured"]) == set(HOST_GPU_PROBES)
    merged = with_host(CACHED_FLOORS, kept)
    assert set(merged["provenance"]["remeasured"]) == {*HOST_PROBES, *HOST_GPU_PROBES}
    assert merged["skipped"] == {"launch_dependent": "an older reason"}
    (bound,) = bounds({"latency": {"launches": 100}}, merged)
    assert bound.seconds == pytest.approx(100 * 9.0e-6)
    (syncs,) = bounds({"latency": {"syncs": 10}}, merged)
    assert syncs.seconds == pytest.approx(10 * 13.0e-6)
    (cached,) = bounds({"latency": {"launches": 100}}, CACHED_FLOORS)
    assert cached.seconds == pytest.approx(100 * 4.6e-6)
    assert "--host-peaks" not in capsys.readouterr().err


@pytest.mark.parametrize("device, gpu, why", [("cpu", "6", "the run uses the CPU (--device cpu)"),
                                              ("auto", None, "no CUDA GPU")])
def test_without_a_gpu_the_floors_are_not_measured_and_the_cached_ones_price_the_run(
        tmp_path, monkeypatch, capsys, device, gpu, why):
    run_dir, measured, on_gpu = run_with(tmp_path, monkeypatch, device=device, gpu=gpu)
    assert measured == [1] and on_gpu == []
    kept = _kept(run_dir)
    assert kept["skipped"] == dict.fromkeys(HOST_GPU_PROBES, why) and "remeasured" not in kept["provenance"]
    assert f"launch, sync not measured ({why})" in capsys.readouterr().err
    merged = with_host(CACHED_FLOORS, kept)
    assert set(merged["provenance"]["remeasured"]) == set(HOST_PROBES)
    assert merged["latency"]["launch_eager"]["value"] == 4.6 and merged["skipped"] == CACHED_FLOORS["skipped"]
    (bound,) = bounds({"latency": {"launches": 100}}, merged)
    assert bound.seconds == pytest.approx(100 * 4.6e-6)


@pytest.mark.parametrize("failure", [HostGpuFailed("'aisp peak --only launch,sync' ran past 120 s"),
                                     HostGpuFailed("'aisp peak --only launch,sync' exited 1: RuntimeError: CUDA")])
def test_a_failed_floor_measurement_leaves_the_run_going_at_the_cached_floors(tmp_path, monkeypatch, capsys, failure):
    run_dir, measured, on_gpu = run_with(tmp_path, monkeypatch, device="auto", gpu="0", gpu_figures=failure)
    assert measured == [1] and on_gpu == ["0"]
    (result,) = json.loads((run_dir / "summary.json").read_text())["results"]
    assert result["verdict"] not in ("error", "skipped")  # the run went on and timed the pair
    assert result["ceiling"]["value"] == 9.0  # the CPU's host figures still price the run
    kept = _kept(run_dir)
    assert kept["errors"] == dict.fromkeys(HOST_GPU_PROBES, str(failure))
    assert str(failure) in capsys.readouterr().err
    (bound,) = bounds({"latency": {"launches": 100}}, with_host(CACHED_FLOORS, kept))
    assert bound.seconds == pytest.approx(100 * 4.6e-6)


def test_a_resumed_run_does_not_measure_the_floors_again(tmp_path, monkeypatch):
    run_dir, measured, on_gpu = run_with(tmp_path, monkeypatch, device="auto", gpu="0")
    suite.resume(run_dir, [], (), {}, reporter=Reporter())  # its exit code is the pair's timing's
    assert measured == [1] and on_gpu == ["0"]


def test_a_host_link_is_priced_at_the_run_hosts_figure(host_run):
    run_dir, measured = host_run
    (result,) = json.loads((run_dir / "summary.json").read_text())["results"]
    assert measured == [1]
    assert result["ceiling"]["value"] == 9.0 and result["ceiling"]["detail"] == "4e+06 B at the page_cache peak"
    assert _kept(run_dir) == {**HERE, "skipped": dict.fromkeys(HOST_GPU_PROBES, "the run uses the CPU (--device cpu)")}


def test_a_resumed_run_reuses_its_figures_without_measuring_again(host_run, monkeypatch):
    run_dir, first = host_run
    measured, _ = fake_measurements(monkeypatch)  # counts a measurement the resume would make
    suite.resume(run_dir, [], (), {}, reporter=Reporter())  # its exit code is the pair's timing's
    assert first == [1] and measured == []


def test_the_ceilings_report_prices_the_run_at_its_own_host(host_run, monkeypatch):
    """``aisp report ceilings RUN`` recomputes each ceiling from peaks: with the run's own host figures
    (9 GB/s) the pair reaches a ninth of what the cached host's (1 GB/s) would give it."""
    from aisp.cli.report import _run_results
    from aisp.report.ceilings import rows

    run_dir, _ = host_run
    monkeypatch.setattr("aisp.peak.measure.load_peaks", lambda key: CACHED)
    (own,) = rows(*_run_results(run_dir, False, False, {})[::2])
    kept = (run_dir / RUN_HOST_PEAKS).read_bytes()
    (run_dir / RUN_HOST_PEAKS).unlink()
    try:
        (cached,) = rows(*_run_results(run_dir, False, False, {})[::2])
    finally:
        (run_dir / RUN_HOST_PEAKS).write_bytes(kept)  # the run is the module's: the other tests read it whole
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


def test_the_floors_subprocess_is_aisp_peak_on_the_named_gpu(monkeypatch):
    """``measure_host_gpu`` runs ``aisp peak --only launch,sync --out FILE`` with the GPU as its only
    visible one, under a time limit, and returns what it wrote."""
    seen = {}

    def fake_run(argv, env, timeout, **kw):
        seen.update(argv=argv, gpu=env["CUDA_VISIBLE_DEVICES"], timeout=timeout)
        Path(argv[argv.index("--out") + 1]).write_text(json.dumps(GPU_HERE))
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(measure.subprocess, "run", fake_run)
    found = measure.measure_host_gpu("GPU-abc", timeout_s=60)
    assert found["latency"] == GPU_HERE["latency"]
    assert seen["argv"][:6] == [sys.executable, "-m", "aisp", "peak", "--only", "launch,sync"]
    assert seen["gpu"] == "GPU-abc" and seen["timeout"] == 60


@pytest.mark.parametrize("outcome, message", [
    (subprocess.TimeoutExpired(["aisp"], 60), "ran past 60 s"),
    (subprocess.CompletedProcess(["aisp"], 1, "", "Traceback\nRuntimeError: CUDA error: no device\n"),
     "exited 1: RuntimeError: CUDA error: no device"),
    (subprocess.CompletedProcess(["aisp"], 0, "", ""), "exited 0: no output")])
def test_a_floors_subprocess_that_fails_says_how(monkeypatch, outcome, message):
    def fake_run(argv, **kw):
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    monkeypatch.setattr(measure.subprocess, "run", fake_run)
    with pytest.raises(HostGpuFailed, match=message):
        measure.measure_host_gpu("0", timeout_s=60)


def test_a_floors_file_that_cannot_be_read_is_a_failure_too(monkeypatch):
    def fake_run(argv, **kw):
        Path(argv[argv.index("--out") + 1]).write_text("{")
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(measure.subprocess, "run", fake_run)
    with pytest.raises(HostGpuFailed, match="malformed JSON"):
        measure.measure_host_gpu("0")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_floors_are_measured_on_a_real_gpu_without_a_context_here():
    """On a GPU: the subprocess measures the launch and sync floors, and this process starts no CUDA
    context (a suite's parent must not: its workers fork from a zygote)."""
    started = torch.cuda.is_initialized()  # another test in this process may have started CUDA
    found = measure.measure_host_gpu(first_gpu("1"))
    for name in ("launch_eager", "launch_graph", "launch_graph_node", "sync_roundtrip"):
        assert found["latency"][name]["value"] > 0, name
    assert found["errors"] == {} and found["skipped"] == {} and torch.cuda.is_initialized() == started

