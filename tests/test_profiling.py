"""torch.profiler capture on CPU, the Nsight runners' skips and timeouts, and ``aisp profile``."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
import torch
from pair_variants import variant_names
from typer.testing import CliRunner

from aisp.cli.main import app
from aisp.harness.benchmark import Benchmark
from aisp.profile.capture import capture_torch, memory_timeline, run_ncu
from aisp.profile.ncu import function_name, kernel_regex, parse_raw_csv, select_kernels, top_launches
from aisp.profile.nsight import run_logged, run_nsys

FIXTURES = Path(__file__).parent / "fixtures"


class Matmuls(Benchmark):
    """Three matmuls per run, each allocating its output."""

    def setup(self) -> None:
        self.a = torch.randn(32, 32, generator=self.generator())

    def run(self) -> torch.Tensor:
        out = self.a
        for _ in range(3):
            out = out @ self.a
        return out


def test_capture_torch_writes_trace_ops_memory_and_summary(tmp_path):
    bench = Matmuls()
    bench.setup()
    result = capture_torch({"base": bench}, tmp_path, iterations=2)
    summary = result["base"]
    trace = json.loads((tmp_path / "base.trace.json").read_text())
    ranges = [e for e in trace["traceEvents"] if e.get("cat") == "user_annotation" and e["name"] == "base"]
    assert len(ranges) == 2, "each profiled iteration is one range named after the variant"
    ops = (tmp_path / "base.ops.txt").read_text()
    assert "self_cpu_time_total" in ops and "aten::mm" in ops and "[[32, 32], [32, 32]]" in ops
    memory = json.loads((tmp_path / "base.memory.json").read_text())
    assert memory["schema_version"] >= 1 and memory["events"]
    assert memory["peak_allocated_bytes"]["cpu"] >= 32 * 32 * 4
    assert summary["profiled_iterations"] == 2 and summary["device"] == "cpu"
    assert {op["name"]: op["count"] for op in summary["top_cpu_ops"]}["aten::mm"] == 6
    assert set(summary["files"]) == {"trace", "ops", "memory"}


def test_memory_timeline_tracks_peak_per_device(tmp_path):
    def alloc(ts, nbytes, total, dev_type=0, dev_id=-1):
        return {"ph": "i", "name": "[memory]", "ts": ts, "args": {
            "Bytes": nbytes, "Total Allocated": total, "Total Reserved": 0,
            "Device Type": dev_type, "Device Id": dev_id}}
    events = [alloc(10.0, 100, 100), alloc(11.0, 50, 150), alloc(12.0, -100, 50),
              alloc(13.0, 4096, 4096, 1, 0)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    timeline = memory_timeline(path, "v")
    assert timeline["peak_allocated_bytes"] == {"cpu": 150, "cuda:0": 4096}
    assert [e["t_us"] for e in timeline["events"]] == [0.0, 1.0, 2.0, 3.0]


def test_nsight_tools_skip_with_the_reason_when_absent(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    pair = Path("ch01/baseline_batch_size.py")
    assert run_ncu(pair, tmp_path) == {"skipped": "ncu not found on PATH"}
    assert run_nsys(pair, tmp_path) == {"skipped": "nsys not found on PATH"}


def test_run_logged_kills_a_tool_that_outlives_its_timeout(tmp_path):
    """The tool is killed at its timeout, not waited for: it never gets to say it outlived it. (No
    bound on the seconds that took: a loaded host's clock is no evidence.)"""
    log = tmp_path / "log"
    assert run_logged(["sh", "-c", "sleep 30; echo outlived"], log, timeout_s=0.5) is None
    assert "outlived" not in log.read_text()


def test_run_logged_also_kills_a_child_in_a_session_of_its_own(tmp_path, monkeypatch):
    """torchrun starts each rank in a session of its own: killing the tool's process group alone
    left such a child running (a rank hung in NCCL would hold its GPU). The tool's time runs out once
    it has started that child (its pid in the log), not at a fixed second: a busy host could take
    longer than that to start the tool's Python, which then had no child to leave."""
    import subprocess
    from types import SimpleNamespace

    import psutil

    from aisp.profile import nsight

    log = tmp_path / "log"

    class OutOfTimeOnceStarted(subprocess.Popen):
        ran_out = False

        def wait(self, timeout=None):
            if self.ran_out:  # kill_tree's wait for the killed tool
                return super().wait(timeout)
            self.ran_out = True
            deadline = time.monotonic() + 60  # a bound for a broken test only
            while not log.read_text().strip() and self.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            raise subprocess.TimeoutExpired(self.args, timeout)

    monkeypatch.setattr(nsight, "subprocess", SimpleNamespace(Popen=OutOfTimeOnceStarted, STDOUT=subprocess.STDOUT,
                                                              TimeoutExpired=subprocess.TimeoutExpired))
    spawn = ("import subprocess, sys, time; "
             "p = subprocess.Popen(['sleep', '60'], start_new_session=True); "
             "print(p.pid, flush=True); time.sleep(60)")
    assert run_logged([sys.executable, "-c", spawn], log, timeout_s=3) is None
    child = int(log.read_text().split()[0])
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE


runner = CliRunner()


def test_cli_profile_run_torch_writes_files_for_both_variants(tmp_path):
    out = tmp_path / "prof"
    result = runner.invoke(app, ["profile", "run", "-t", "ch01:batch_size", "--tool", "torch",
                                 "--output-dir", str(out), "--iterations", "1", "--warmup", "0"])
    assert result.exit_code == 0, result.output
    for variant in variant_names("ch01:batch_size"):
        for suffix in ("trace.json", "ops.txt", "memory.json"):
            assert (out / f"{variant}.{suffix}").is_file()
        json.loads((out / f"{variant}.trace.json").read_text())
    saved = json.loads((out / "profile_torch.json").read_text())
    assert saved["target"] == "ch01:batch_size" and set(saved["variants"]) == variant_names("ch01:batch_size")
    assert "window per iteration" in result.output and "baseline" in result.output


def test_cli_profile_run_ncu_and_nsys_report_the_skip(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    for tool in ("ncu", "nsys"):
        result = runner.invoke(app, ["profile", "run", "-t", "ch01:batch_size", "--tool", tool,
                                     "--output-dir", str(tmp_path / tool)])
        assert result.exit_code == 0, result.output
        assert f"skipped: {tool} not found on PATH" in result.output


def test_cli_profile_run_rejects_an_unknown_target(tmp_path):
    result = runner.invoke(app, ["profile", "run", "-t", "ch01:no_such_pair", "--output-dir", str(tmp_path)])
    assert result.exit_code == 2


def test_cli_profile_summarize_prints_the_numbers_and_findings():
    result = runner.invoke(app, ["profile", "summarize", str(FIXTURES / "traces" / "gpu_launch_bound.trace.json")])
    assert result.exit_code == 0, result.output
    for text in ("gemm_small", "launches: 40", "host gaps > 10 µs: 39", "GPU busy: 21.0%", "small-kernels:"):
        assert text in result.output


NCU_CSV = FIXTURES / "ncu" / "batch_size_baseline.raw.csv"
KERNEL2 = "Kernel2 <<<(8, 2, 8), (128, 1, 1)>>>"
RELU = "vectorized_elementwise_kernel <<<(32, 1, 1), (128, 1, 1)>>>"


def test_parse_ncu_raw_csv_recorded_on_an_h200():
    """ch01 baseline_batch_size under ncu 2025.3 on an H200 (demangled names, base units)."""
    kernels = parse_raw_csv(NCU_CSV.read_text())
    assert len(kernels) == 6
    k = kernels[KERNEL2]
    assert (k["occupancy"], k["dram_pct"], k["memory_pct"], k["sm_pct"]) == (6.25, 7.38, 35.36, 29.37)
    assert k["duration_us"] == pytest.approx(6.208)
    assert k["top_stalls"][0] == ["imc_miss", 0.28]
    assert k["demangled"].startswith("void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_nn_align1>")
    relu = kernels[RELU]
    assert relu["top_stalls"][0] == ["long_scoreboard", 12.78]
    assert all(r != "selected" for m in kernels.values() for r, _ in m["top_stalls"])


def test_select_kernels_keeps_the_traced_launches_in_order_and_drops_setup_kernels():
    """The setup's elementwise multiply shares its function name with the run's ReLU; the launch
    configuration tells them apart (ncu's and CUPTI's demangled names differ, so names cannot)."""
    kernels = parse_raw_csv(NCU_CSV.read_text())
    wanted = [KERNEL2, RELU, "splitKreduce_kernel <<<(16, 2, 1), (32, 16, 1)>>>"]
    top, matched = select_kernels(kernels, wanted, 5)
    assert matched and list(top) == wanted
    assert "vectorized_elementwise_kernel <<<(512, 1, 1), (128, 1, 1)>>>" not in top
    top, matched = select_kernels(kernels, ["no_such_kernel <<<(1, 1, 1), (1, 1, 1)>>>"], 2)
    assert not matched
    assert [m["duration_us"] for m in top.values()] == pytest.approx([6.336, 6.208])


def test_top_launches_ranks_a_traces_kernels_by_launch_configuration():
    trace = FIXTURES / "traces" / "gpu_launch_bound.trace.json"
    assert top_launches(trace, 5) == ["gemm_small <<<(1, 1, 1), (128, 1, 1)>>>",
                                      "relu_kernel <<<(1, 1, 1), (128, 1, 1)>>>"]
    assert top_launches(trace, 1) == ["gemm_small <<<(1, 1, 1), (128, 1, 1)>>>"]


def test_kernel_names_become_ncu_function_names():
    assert function_name("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous "
                         "namespace)::launch_clamp_scalar(float)::{lambda(float)#1}>(int, float*)") == \
        "vectorized_elementwise_kernel"
    assert function_name("void (anonymous namespace)::foo<int>(int)") == "foo"
    assert function_name("nvjet_tst_128x64_64x8_1x2_h_bz_NNT") == "nvjet_tst_128x64_64x8_1x2_h_bz_NNT"
    assert kernel_regex(["void a::k.x<1>(int)", "sm90_gemm", "void b::k.x<2>(float)"]) == r"^(k\.x|sm90_gemm)$"


FAKE_NCU = """#!{python}
import pathlib, sys
args = sys.argv[1:]
pathlib.Path({log!r}).open("a").write(" ".join(args) + "\\n")
if "--import" in args:
    print("==PROF== a line before the table")
    print(pathlib.Path({csv!r}).read_text())
else:
    pathlib.Path(args[args.index("-o") + 1] + ".ncu-rep").write_text("report")
"""


def test_run_ncu_builds_the_command_and_parses_the_report(tmp_path, monkeypatch):
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls.txt"
    bin_dir.mkdir()
    fake = bin_dir / "ncu"
    fake.write_text(FAKE_NCU.format(python=sys.executable, log=str(calls), csv=str(NCU_CSV)))
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    pair = Path("ch01/baseline_batch_size.py")
    result = run_ncu(pair, tmp_path, kernels=5, launches=[KERNEL2])
    profile_call, import_call = calls.read_text().splitlines()
    for part in ("--clock-control none", "--target-processes all", "--filter-mode per-launch-config",
                 "--launch-skip 1 --launch-count 1", "--section WarpStateStats", "--section Occupancy",
                 "--kernel-name regex:^(Kernel2)$", f"{pair.resolve()} --iterations 2 --warmup 1"):
        assert part in profile_call
    assert "--csv --page raw" in import_call
    assert result["matched"] and list(result["kernels"]) == [KERNEL2]
    assert Path(result["report"]).is_file()


def test_run_ncu_reports_a_failed_run_with_its_log(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "ncu"
    fake.write_text(f"#!{sys.executable}\nimport sys\nprint('==ERROR== ERR_NVGPUCTRPERM')\nsys.exit(1)\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    result = run_ncu(Path("ch01/baseline_batch_size.py"), tmp_path)
    assert result["error"] == "ncu exited with 1"
    assert "ERR_NVGPUCTRPERM" in result["log_tail"]
