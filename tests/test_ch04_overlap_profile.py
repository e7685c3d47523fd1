"""ch04/overlap_profile.py: the timeline arithmetic on a hand-made trace (busy time per kind, the
collective time beside compute, idle time), the kernel classes, the one-line errors (not a rank,
an unknown target), and a whole run on two gloo CPU ranks over a tiny pair of our own (timed, traced,
reported as having no device work)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO

from aisp.harness.loader import import_module_at
from aisp.profile.trace_events import Event

TOOL = REPO / "ch04" / "overlap_profile.py"
op = import_module_at(TOOL)


def ev(name: str, start: float, dur: float, cat: str = "kernel") -> Event:
    return Event(name, cat, start, dur, 0, 7)


def test_kernels_fall_into_their_kinds() -> None:
    assert op.kind(ev("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 0, 1)) == "comm"
    assert op.kind(ev("c10d::symmetric_memory::barrier_kernel", 0, 1)) == "comm"
    assert op.kind(ev("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", 0, 1)) == "gemm"
    assert op.kind(ev("Memcpy PtoP (Device -> Device)", 0, 1, "gpu_memcpy")) == "copy"
    assert op.kind(ev("void at::native::vectorized_elementwise_kernel<4, GeluCUDAKernelImpl>", 0, 1)) == "other"


def test_timeline_splits_a_call_into_busy_overlapped_and_idle_time() -> None:
    events = [ev("ncclDevKernel_AllReduce", 0, 10), ev("nvjet_gemm", 5, 10), ev("gelu", 20, 5),
              ev("Memcpy DtoD", 30, 2, "gpu_memcpy"), ev("aten::mm", 0, 40, "cpu_op")]  # host ops do not count
    t = op.timeline(events, calls=1)
    assert t["span_ms"] == pytest.approx(0.032)
    assert t["busy_ms"] == pytest.approx({"comm": 0.010, "gemm": 0.010, "copy": 0.002, "other": 0.005})
    assert t["comm_overlap_ms"] == pytest.approx(0.005)  # the all-reduce's 5 us beside the GEMM
    assert t["idle_ms"] == pytest.approx(0.010)  # 32 us span, 22 us of it busy
    assert t["top"][0] == ("ncclDevKernel_AllReduce", pytest.approx(0.010))
    halves = op.timeline(events, calls=2)
    assert halves["span_ms"] == pytest.approx(0.016) and halves["comm_overlap_ms"] == pytest.approx(0.0025)
    assert op.timeline([ev("aten::mm", 0, 4, "cpu_op")], 1)["note"].startswith("no device work")


def test_outside_torchrun_it_says_how_to_run_it(monkeypatch, capsys) -> None:
    monkeypatch.delenv("RANK", raising=False)
    assert op.main(["-t", "ch04:ddp_overlap_multigpu"]) == 2
    assert "torchrun --nproc-per-node 2" in capsys.readouterr().out


TINY = '''"""Test fixture: a matmul whose result is all-reduced; {what}."""
import torch
import torch.distributed as dist

import aisp


class Tiny(aisp.Benchmark):
    workload = aisp.Workload()

    def setup(self):
        self.x = torch.ones(64, 64, device=self.device)

    def run(self):
        y = self.x @ self.x
        {call}
        return y


def get_benchmark():
    return Tiny()
'''


def torchrun(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(TOOL), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240)


def test_two_gloo_ranks_time_and_trace_every_variant(tmp_path) -> None:
    pairs = tmp_path / "mypairs"
    pairs.mkdir()
    (pairs / "baseline_tiny.py").write_text(TINY.format(what="blocking", call="dist.all_reduce(y)"))
    (pairs / "optimized_tiny.py").write_text(TINY.format(what="async", call="dist.all_reduce(y, async_op=True).wait()"))
    out = tmp_path / "out"
    args = ("-t", "mypairs:tiny", "--root", str(pairs), "--device", "cpu", "--out", str(out),
            "--iterations", "3", "--steps", "2", "--warmup", "1")
    done = torchrun(*args)
    for _ in range(2):
        if not (done.returncode != 0 and "(SIGABRT)" in done.stderr and (out / "overlap_profile.json").exists()):
            break
        # Gloo's TCP teardown can abort a rank whose peer closed its sockets first (a known upstream
        # race, pytorch/pytorch#50701); seen on a loaded 2-core host after every row was written,
        # twice in a row once (2026-11-29, full suite under -n 2). Two reruns; a third abort, or any
        # other failure, fails the test.
        (out / "overlap_profile.json").unlink()
        done = torchrun(*args)
    rank_errors = "\n".join(line for line in done.stderr.splitlines() if "[rank" in line or "what()" in line)
    assert done.returncode == 0, done.stdout[-2000:] + rank_errors[-3000:] + done.stderr[-2000:]
    rows = json.loads((out / "overlap_profile.json").read_text())
    assert [r["variant"] for r in rows] == ["baseline_tiny", "optimized_tiny"]
    for r in rows:
        assert r["per_call_ms"] > 0 and r["back_to_back_ms"] > 0 and (out / f"{r['variant']}.trace.json").exists()
        assert r["note"].startswith("no device work")
    bad = torchrun("-t", "mypairs:nothing", "--root", str(pairs), "--device", "cpu", "--out", str(out))
    assert bad.returncode != 0 and "overlap_profile:" in bad.stdout
