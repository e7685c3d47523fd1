"""The latency floors of ``aisp peak``: the per-event arithmetic on a fake clock, the dispatch probe on
a CPU, the GPU probes' skip lines, the ``latency`` section (and files written before it), the
back-to-back all-reduce burst on two gloo ranks; on a GPU, the probes for real."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from typer.testing import CliRunner

from aisp.cli.main import app
from aisp.kits import native
from aisp.peak import allreduce, latency
from aisp.peak.measure import latency_figure, measure_peaks, probe_names, save_peaks
from aisp.peak.probes import PeakConfig, ProbeSkipped

CPU = torch.device("cpu")
TINY = PeakConfig(cpu_matmul_n=128, matmul_iters=1, repeats=2, copy_bytes=1 << 20, compile=False,
                  latency_calls=50, host_bytes=1 << 20, first_touch_bytes=1 << 20)
OLD_H200 = Path(__file__).parent / "fixtures" / "peaks" / "peak_h200_before_latency.json"  # the H200 file as written before the latency section


class FakeClock:
    """perf_counter advancing ``step`` seconds per call of the timed function."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        return self.now

    def tick(self) -> None:
        self.now += self.step


def test_a_window_is_divided_by_its_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock(3e-6)
    monkeypatch.setattr(latency.time, "perf_counter", clock)
    assert latency.host_us_per_call(clock.tick, CPU, calls=100, repeats=3) == pytest.approx(3.0)


def test_the_dispatch_probe_runs_on_a_cpu() -> None:
    found = latency.dispatch(calls=50, repeats=2)["dispatch_torch_op"]
    assert found["unit"] == "us" and found["value"] > 0


@pytest.mark.parametrize(("probe", "why"), [
    (lambda: latency.launches(CPU, 10, 2), "no GPU: kernel launch latency"),
    (lambda: latency.dependent_nodes(CPU, 10, 2), "no GPU: dependent graph node latency"),
    (lambda: latency.sync_roundtrip(CPU, 10, 2), "no GPU: the sync round trip"),
    (lambda: latency.small_copies(CPU, 10, 2), "no GPU: small-copy latency"),
])
def test_gpu_latency_probes_say_why_they_skip_on_a_cpu(probe, why) -> None:
    with pytest.raises(ProbeSkipped, match=why):
        probe()


def test_peaks_hold_a_latency_section_and_explain_each_missing_figure() -> None:
    peaks = measure_peaks(TINY, CPU)
    assert set(peaks["latency"]) == {"dispatch_torch_op"}
    for probe in ("launch", "launch_dependent", "sync", "small_copy", "allreduce_latency"):
        assert peaks["skipped"][probe]
    assert peaks["errors"] == {}


def test_the_dependent_node_probe_is_listed_and_skips_alone_on_a_cpu() -> None:
    """``aisp peak --only launch_dependent`` measures it alone (merged into a file measured before it)."""
    names = probe_names()
    assert names.index("launch_dependent") == names.index("launch") + 1
    peaks = measure_peaks(TINY, CPU, only=["launch_dependent"])
    assert "no GPU" in peaks["skipped"]["launch_dependent"] and peaks["latency"] == {} and peaks["errors"] == {}
    shown = CliRunner().invoke(app, ["peak", "--only", "launch_dependent_x"])
    assert shown.exit_code == 2 and "launch_dependent" in shown.output


@pytest.mark.skipif(shutil.which("nvcc") is None or native.cuobjdump() is None, reason="needs nvcc and cuobjdump")
def test_the_dependent_node_kernel_loads_adds_and_stores_one_value() -> None:
    """Each node reads what the one before it stored and stores what the next reads: one load, one add,
    one store in its sm_90 SASS (built on a CPU with nvcc), no loop."""
    sass = latency.DEPENDENT_NODE.sass("90")
    body = next(part for part in re.split(r"\n\s*Function : ", sass)[1:] if part.startswith("_Z4bumpPi"))
    ops = re.findall(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", body)
    assert [op.split(".")[0] for op in ops if op.split(".")[0] in ("LDG", "STG", "IADD3", "BRA")][:3] == \
        ["LDG", "IADD3", "STG"], ops
    assert sum(op.startswith("LDG") for op in ops) == 1 and sum(op.startswith("STG") for op in ops) == 1


def test_latency_figures_are_read_from_new_and_old_files() -> None:
    new = {"latency": {"launch_graph_node": {"value": 0.9, "unit": "us", "detail": "x"}}, "measurements": {}}
    assert latency_figure(new, "launch_graph_node") == 0.9
    assert latency_figure(new, "sync_roundtrip") is None
    old = json.loads(OLD_H200.read_text())  # written before the latency section existed
    assert "latency" not in old
    assert latency_figure(old, "launch_eager") == old["measurements"]["launch_eager"]["value"]
    assert latency_figure(old, "launch_graph_node") == old["measurements"]["launch_graph"]["value"]
    assert latency_figure(old, "launch_graph") is None  # an old file's graph figure was per node


def test_allreduce_burst_on_two_gloo_ranks_times_each_call() -> None:
    rows = allreduce.sweep(2, "cpu", [8, 1024], samples=2, timeout_s=120, burst=20)
    assert [(r.bytes, r.ranks) for r in rows] == [(8, 2), (1024, 2)]
    assert all(r.time_us > 0 for r in rows)  # CPU figures mean nothing; the plumbing is checked
    assert "--burst" in allreduce.launch_argv(2, "cuda", [8], 3, Path("o.json"), burst=500)


def test_a_graph_burst_needs_cuda_and_fails_the_sweep_on_gloo() -> None:
    assert "--graph" in allreduce.launch_argv(2, "cuda", [8], 3, Path("o.json"), burst=500, graph=True)
    assert "--graph" not in allreduce.launch_argv(2, "cuda", [8], 3, Path("o.json"), burst=500)
    with pytest.raises(RuntimeError, match="graph capture needs CUDA"):
        allreduce.sweep(2, "cpu", [8], samples=2, timeout_s=120, burst=5, graph=True)


def test_a_sweep_past_its_limit_ends_its_ranks_too(monkeypatch) -> None:
    """The sweep's time runs out once both ranks run (their own Pythons, in sessions of their own),
    not at a fixed second: at 1 s a busy host's torchrun had often started no rank yet, which left
    nothing to end, or was starting one as the sweep ended the others. The ranks' million samples
    keep them running until then."""
    import time

    import psutil

    marker = "7777771"  # a message size no other test uses: finds this sweep's processes

    def ranks() -> list[psutil.Process]:
        found = []
        for p in psutil.process_iter(["cmdline"]):
            line = " ".join(p.info["cmdline"] or [])
            if marker in line and "aisp.peak.allreduce" in line and "torch.distributed.run" not in line:
                found.append(p)
        return found

    seen: list[int] = []

    class OutOfTimeOnceRanksRun(subprocess.Popen):
        def communicate(self, input=None, timeout=None):
            if seen:  # the sweep's read of the killed launch's output
                return super().communicate(input, timeout)
            deadline = time.monotonic() + 120  # a bound for a broken test only
            while len(ranks()) < 2 and self.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            seen.append(len(ranks()))
            raise subprocess.TimeoutExpired(self.args, timeout)

    monkeypatch.setattr(allreduce, "subprocess", SimpleNamespace(
        Popen=OutOfTimeOnceRanksRun, PIPE=subprocess.PIPE, STDOUT=subprocess.STDOUT,
        TimeoutExpired=subprocess.TimeoutExpired))
    with pytest.raises(RuntimeError, match="ran past 1 s"):
        allreduce.sweep(2, "cpu", [int(marker)], samples=10**6, timeout_s=1.0, burst=5)
    assert seen == [2], "both ranks were running when the sweep ran out of time"
    left = [p for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])]
    assert left == []


def test_ending_a_sweep_ends_ranks_in_sessions_of_their_own_and_their_pipe():
    """torchrun starts each rank in a session of its own: killing torchrun's process group left two
    gloo ranks alive in a full test run, and reading torchrun's output waited for the pipe they held."""
    import psutil

    marker = "7777773"
    child = (f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', "
             f"'{marker}'], start_new_session=True); print('started', flush=True); time.sleep(600)")
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    assert proc.stdout.readline().strip() == "started"
    allreduce.end_tree(proc, marker)
    assert proc.poll() is not None
    left = [p for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])]
    assert left == []


def _rows(*times: float) -> list[allreduce.Row]:
    return [allreduce.Row("all_reduce", n, 4, t, 0.0, 0.0) for n, t in zip(latency.ALLREDUCE_LATENCY_BYTES, times, strict=True)]


def test_the_allreduce_floor_is_the_graph_replay_and_the_eager_figures_stay_beside_it(monkeypatch) -> None:
    """On 4 x H200 the Python-issued burst read 56.5 us at 16 B; the floor a pair's messages are
    priced at is the device's, replayed from a graph; without a capture the eager figure stands in."""
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    calls = []

    def fake_sweep(ranks, device, sizes, samples, timeout_s=600.0, burst=0, graph=False, op="all_reduce"):
        calls.append(graph)
        return _rows(12.0, 13.0, 20.0) if graph else _rows(56.5, 58.3, 57.5)

    monkeypatch.setattr(latency, "sweep", fake_sweep)
    found = latency.allreduce(torch.device("cuda", 0), 1000, 3)
    assert calls == [False, True]
    assert found["allreduce_latency"]["value"] == 12.0 and found["allreduce_eager_8B"]["value"] == 56.5
    assert "replayed from a CUDA graph" in found["allreduce_latency"]["detail"]

    def no_capture(ranks, device, sizes, samples, timeout_s=600.0, burst=0, graph=False, op="all_reduce"):
        if graph:
            raise RuntimeError("torchrun exited 1: capture failed")
        return _rows(56.5, 58.3, 57.5)

    monkeypatch.setattr(latency, "sweep", no_capture)
    found = latency.allreduce(torch.device("cuda", 0), 1000, 3)
    assert found["allreduce_latency"]["value"] == 56.5
    assert "graph capture failed: torchrun exited 1: capture failed" in found["allreduce_latency"]["detail"]


def test_allreduce_latency_needs_two_gpus() -> None:
    with pytest.raises(ProbeSkipped, match="needs 2 GPUs"):
        latency.allreduce(CPU, 10, 2)
    with pytest.raises(ProbeSkipped, match="needs 2 GPUs"):
        latency.alltoall(CPU, 10, 2)


def test_alltoall_burst_on_two_gloo_ranks_times_each_call() -> None:
    """The sweep runs the collective it is told: all-to-all rows on two gloo ranks (the plumbing; CPU
    figures mean nothing), and the launch names the op."""
    rows = allreduce.sweep(2, "cpu", [8, 1024], samples=2, timeout_s=120, burst=10, op="all_to_all")
    assert [(r.op, r.bytes, r.ranks) for r in rows] == [("all_to_all", 8, 2), ("all_to_all", 1024, 2)]
    assert all(r.time_us > 0 for r in rows)
    assert allreduce.launch_argv(2, "cuda", [8], 3, Path("o.json"), op="all_to_all")[-3:-1] == ["--op", "all_to_all"]


def test_the_alltoall_floor_takes_the_graph_replay(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    asked = []

    def fake_sweep(ranks, device, sizes, samples, timeout_s=600.0, burst=0, graph=False, op="all_reduce"):
        asked.append((op, graph))
        return [allreduce.Row(op, n, 2, 9.0 if graph else 40.0, 0.0, 0.0) for n in sizes]

    monkeypatch.setattr(latency, "sweep", fake_sweep)
    found = latency.alltoall(torch.device("cuda", 0), 1000, 3)
    assert asked == [("all_to_all", False), ("all_to_all", True)]
    assert found["alltoall_latency"]["value"] == 9.0 and found["alltoall_eager_8B"]["value"] == 40.0
    assert "NCCL all-to-all, 2 ranks" in found["alltoall_latency"]["detail"]


@pytest.mark.gpu
def test_gpu_latency_probes_measure_every_figure() -> None:
    device = torch.device("cuda", 0)
    found = {**latency.launches(device, 200, 3), **latency.sync_roundtrip(device, 200, 3),
             **latency.small_copies(device, 200, 3)}
    assert set(found) == {"launch_eager", "launch_graph", "launch_graph_node", "sync_roundtrip",
                          "copy_h2d_small", "copy_d2h_small", "copy_d2d_small"}
    assert all(m["unit"] == "us" and m["value"] > 0 for m in found.values())
    print(json.dumps(found, indent=1))


@pytest.mark.gpu
def test_a_dependent_graph_node_costs_at_least_an_empty_one() -> None:
    """The chain of one-element read-modify-writes, each node on the last one's output, against empty
    nodes in a graph of as many nodes on the same device (the adds are counted inside the probe)."""
    device = torch.device("cuda", 0)
    empty = latency.launches(device, 1000, 5)["launch_graph_node"]
    found = latency.dependent_nodes(device, 1000, 5)["launch_graph_node_dependent"]
    assert found["unit"] == "us" and "1000-node graph of a one-thread *x += 1" in found["detail"]
    assert found["value"] >= empty["value"] > 0, (found, empty)
    print(json.dumps({"launch_graph_node": empty, "launch_graph_node_dependent": found}, indent=1))


@pytest.mark.multigpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_nccl_small_allreduce_latency_back_to_back() -> None:
    found = latency.allreduce(torch.device("cuda", 0), 500, 3)
    assert found["allreduce_latency"]["value"] == found["allreduce_latency_8B"]["value"] > 0
    print(json.dumps(found, indent=1))


def test_cli_table_shows_the_latency_floors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AISP_PEAK_DIR", str(tmp_path))
    monkeypatch.setattr("aisp.harness.environment.hardware_key", lambda: "h999")
    save_peaks({"measurements": {}, "skipped": {}, "errors": {}, "provenance": {"hardware_key": "h999"},
                "latency": {"launch_graph_node": {"value": 0.87, "unit": "us", "detail": "empty kernels"}}})
    shown = CliRunner().invoke(app, ["peak"], terminal_width=200)
    assert shown.exit_code == 0, shown.output
    assert "launch_graph_node" in shown.output and "0.87" in shown.output


def test_all_to_alls_are_priced_at_the_alltoall_floor() -> None:
    from aisp.report.ceilings import ceiling

    peaks = {"measurements": {}, "latency": {"alltoall_latency": {"value": 9.0}}}
    found = ceiling({"name": "optimized_x", "summary": {"median": 0.054}}, {"latency": {"all_to_alls": 3}}, peaks)
    assert found["kind"] == "latency" and found["value"] == pytest.approx(27.0) and found["percent"] == pytest.approx(50)
