"""--reproducible, --cold-start, suite timeout, standalone runs and atomic writes under a kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import REPO

from aisp.harness.discovery import resolve_targets
from aisp.harness.options import RunOptions
from aisp.harness.runner import run_suite
from aisp.suite import hooks_for

MODES = Path(__file__).resolve().parent / "fixtures" / "modes"


def _run(tmp_path, targets, **kw):
    options = RunOptions(iterations=4, warmup=1, warmup_s=0.0, device="cpu", artifacts_dir=tmp_path, **kw)
    results, _ = run_suite(resolve_targets(targets, REPO, (MODES,)), options, hooks=hooks_for(options))
    return {r["name"]: r for r in results}


def test_reproducible_fails_nondeterministic_op_with_message(tmp_path):
    results = _run(tmp_path, ["modes:scatter", "modes:sum"], reproducible=True)
    assert results["scatter"]["verdict"] == "error"
    assert "--reproducible" in results["scatter"]["reason"] and "put_" in results["scatter"]["reason"]
    assert results["sum"]["verdict"] in ("ok-unchecked", "slower")  # timing on a busy CPU may go either way


def test_without_reproducible_the_same_pair_runs(tmp_path):
    assert _run(tmp_path, ["modes:scatter"])["scatter"]["verdict"] in ("ok-unchecked", "slower")


def test_cold_start_times_each_variant_in_its_own_processes(tmp_path):
    """--cold-runs fresh processes per variant; each one's samples are kept as a group."""
    result = _run(tmp_path, ["modes:sum"], cold_start=True, cold_runs=2)["sum"]
    assert result["verdict"] in ("ok-unchecked", "slower")
    for var in (result["baseline"], result["variants"][0]):
        assert len(var["samples_ms"]) == 8 and [len(g) for g in var["sample_groups"]] == [4, 4]
    logs = sorted(p.name for p in (next(tmp_path.iterdir()) / "modes_sum" / "logs").glob("*.log"))
    assert logs == ["cold0_0.log", "cold0_1.log", "cold1_0.log", "cold1_1.log", "pair.log"]


def test_suite_timeout_marks_unstarted_pairs(tmp_path):
    results = _run(tmp_path, ["modes:sum", "modes:scatter"], suite_timeout=0.001)
    assert all(r["verdict"] == "timeout" for r in results.values())


def test_standalone_run_prints_timing():
    # The optimized file (importing its baseline by name): the same 17 GFLOP a call as the baseline in 8x
    # larger GEMMs, a third of the baseline's CPU time (0.35 s a call on one core; 1 s).
    out = subprocess.run([sys.executable, str(REPO / "ch01" / "optimized_batch_size.py"), "--iterations", "2",
                          "--warmup", "0", "--device", "cpu"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Average time:" in out.stdout and "Median:" in out.stdout and "Std:" in out.stdout


WRITER = """
import sys
from pathlib import Path
from aisp.harness.artifacts import atomic_write_json
path = Path(sys.argv[1])
i = 0
while True:
    i += 1
    atomic_write_json(path, {"i": i, "payload": ["x" * 1000] * 2000})
    if i == 1:
        print("written", flush=True)
"""


def test_kill_mid_write_leaves_no_truncated_json(tmp_path):
    target = tmp_path / "result.json"
    for delay in (0.0, 0.013, 0.05, 0.11, 0.2):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(target)], start_new_session=True,
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "written"  # imports done, writes under way
        time.sleep(delay)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        data = json.loads(target.read_text())
        assert data["schema_version"] == 1 and len(data["payload"]) == 2000


def test_profile_full_writes_traces_outside_timing_and_reports_nsight(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no ncu/nsys: their skips must be reported
    result = _run(tmp_path, ["modes:sum"], profile="full")["sum"]
    assert result["verdict"] in ("ok-unchecked", "slower")
    assert len(result["baseline"]["samples_ms"]) == 4
    traces = result["profile"]["variants"]
    assert set(traces) == {"baseline_sum", "optimized_sum"}
    for summary in traces.values():
        assert json.loads(Path(summary["files"]["trace"]).read_text())["traceEvents"]
    assert result["profile"]["nsight"]["ncu"] == {"skipped": "ncu not found on PATH"}
    assert "skipped" in result["profile"]["nsight"]["nsys"]


def test_variant_with_unmet_requirements_is_skipped_alone(tmp_path):
    result = _run(tmp_path, ["modes:sum"])["sum"]
    by_name = {v["name"]: v for v in result["variants"]}
    assert by_name["optimized_sum_gpuonly"]["verdict"] == "skipped"
    assert "CUDA" in by_name["optimized_sum_gpuonly"]["reason"]
    assert by_name["optimized_sum"]["verdict"] in ("ok-unchecked", "slower")
    assert result["verdict"] == by_name["optimized_sum"]["verdict"] and result["best"] == "optimized_sum"


def test_a_workload_may_ask_for_fewer_timed_iterations_never_more(tmp_path):
    """Workload.iterations caps the run's count (a second-long call takes fewer samples); the
    checked call still lands inside the shorter window; a run asking for fewer still gets fewer."""
    result = _run(tmp_path, ["modes:few"])["few"]
    assert result["verdict"] in ("ok-unchecked", "slower")
    for var in (result["baseline"], *result["variants"]):
        assert len(var["samples_ms"]) == 3
    assert any("inputs refilled" in c for c in result["variants"][0]["verification"]["checks"])
    options = RunOptions(iterations=2, warmup=1, warmup_s=0.0, device="cpu", artifacts_dir=tmp_path / "two")
    two, _ = run_suite(resolve_targets(["modes:few"], REPO, (MODES,)), options, hooks=hooks_for(options))
    assert len(two[0]["baseline"]["samples_ms"]) == 2
