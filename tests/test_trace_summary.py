"""The trace summarizer on synthetic GPU traces with known numbers, and on a real CPU trace.

``gpu_launch_bound.trace.json`` (one ProfilerStep, window [1000, 2000] µs): 40 kernels launched
every 25 µs, alternately ``gemm_small`` (6 µs) and ``relu_kernel`` (4 µs); 39 launched by
cudaLaunchKernel, the last by a standalone cuLaunchKernel; one more cuLaunchKernel nested inside
the first cudaLaunchKernel (the runtime calling the driver: not a second launch). Gaps between
kernels: 20 of 19 µs and 19 of 21 µs (779 µs). A 10 µs DtoH memcpy at 1985 (6 µs after the last
kernel: under the 10 µs gap threshold). Ten 10 µs ``aten::empty_strided``. A gpu_user_annotation
span that must not count as device work.

``gpu_busy.trace.json`` (two ProfilerSteps, window [0, 1000] µs): ten 95 µs GEMM kernels every
100 µs on GPU 0, and one 3 µs kernel on GPU 1 (not the primary device).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from aisp.harness.benchmark import Benchmark
from aisp.profile.capture import capture_torch
from aisp.profile.trace_events import Event, gaps_between, merge, self_times, top_level
from aisp.profile.trace_findings import Thresholds
from aisp.profile.trace_summary import summarize_trace

TRACES = Path(__file__).parent / "fixtures" / "traces"
LAUNCH_BOUND = TRACES / "gpu_launch_bound.trace.json"
BUSY = TRACES / "gpu_busy.trace.json"


def keys(findings) -> set[str]:
    return {line.split(":", 1)[0] for line in findings}


def test_launch_bound_numbers_are_exact():
    s = summarize_trace(LAUNCH_BOUND)
    assert s.device == "cuda"
    assert s.window_us == 1000.0
    assert s.iterations == 1
    assert (s.kernel_count, s.kernel_us) == (40, 200.0)
    assert [(k.name, k.count, k.total_us, k.pct) for k in s.top_kernels] == [
        ("void gemm_small<32>(float const*, float*)", 20, 120.0, 60.0),
        ("void at::native::relu_kernel<float>(float*, int)", 20, 80.0, 40.0),
    ]
    assert s.launch_count == 40
    assert s.memcpy_count == 1
    assert (s.gaps.count, s.gaps.total_us, s.gaps.max_us) == (39, 779.0, 21.0)
    assert s.gpu_busy_fraction == pytest.approx(0.21)
    assert s.goodput == pytest.approx(0.20)
    assert (s.empty_strided_us, s.empty_strided_calls) == (100.0, 10)
    assert s.empty_strided_share == pytest.approx(0.1)


def test_launch_bound_findings_fire_with_their_numbers():
    findings = summarize_trace(LAUNCH_BOUND).findings
    assert keys(findings) == {"host-gaps", "small-kernels", "gpu-idle", "alloc"}
    text = "\n".join(findings)
    for number in ("779.0 µs", "39 gaps", "largest 21.0 µs", "40 of 40 kernels", "median 5.0 µs",
                   "busy only 21%", "100.0 µs (10% of the window, 10 calls)"):
        assert number in text


def test_busy_trace_only_reports_good_utilization():
    s = summarize_trace(BUSY)
    assert s.kernel_count == 10, "the kernel on GPU 1 is not the primary device's"
    assert s.iterations == 2
    assert s.gpu_busy_fraction == pytest.approx(0.95)
    assert s.gaps.count == 0
    assert keys(s.findings) == {"gpu-busy"}
    assert "95%" in s.findings[0]


def test_gap_threshold_decides_what_counts():
    s = summarize_trace(LAUNCH_BOUND, Thresholds(gap_us=20.0))
    assert (s.gaps.count, s.gaps.total_us) == (19, 399.0)
    s = summarize_trace(LAUNCH_BOUND, Thresholds(gap_us=25.0))
    assert s.gaps.count == 0
    assert "host-gaps" not in keys(s.findings)


def test_window_stretches_to_device_work_launched_inside(tmp_path):
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "v", "pid": 1, "tid": 1, "ts": 0.0, "dur": 100.0},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 50.0, "dur": 150.0},
        {"ph": "X", "cat": "kernel", "name": "early", "pid": 0, "tid": 7, "ts": -80.0, "dur": 10.0},
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    s = summarize_trace(path)
    assert s.window_us == 200.0
    assert s.gpu_busy_fraction == pytest.approx(0.75)


def test_to_dict_is_json_ready():
    data = json.loads(json.dumps(summarize_trace(LAUNCH_BOUND).to_dict()))
    assert data["gaps"]["count"] == 39
    assert data["top_kernels"][0]["count"] == 20
    assert isinstance(data["findings"], list)


def test_interval_helpers():
    assert merge([(5, 7), (0, 2), (1, 3), (3, 4)]) == [(0, 4), (5, 7)]
    assert gaps_between([(0, 1), (3, 4), (3.5, 6), (10, 11)]) == [2, 4]


def test_self_time_and_top_level_respect_nesting_per_thread():
    evs = [Event("outer", "cpu_op", 0, 10, 1, 1), Event("inner", "cpu_op", 2, 3, 1, 1),
           Event("inner2", "cpu_op", 6, 2, 1, 1), Event("other_thread", "cpu_op", 1, 5, 1, 2)]
    assert self_times(evs) == {0: 5, 1: 3, 2: 2, 3: 5}
    assert [e.name for e in top_level(evs)] == ["outer", "other_thread"]


class SmallOps(Benchmark):
    """Seven adds and two empty_strided allocations per run: a known op count."""

    def setup(self) -> None:
        self.x = torch.ones(16, 16)

    def run(self) -> torch.Tensor:
        y = self.x
        for _ in range(7):
            y = torch.add(y, 1.0)
        torch.empty_strided((16, 16), (16, 1))
        torch.empty_strided((8, 8), (8, 1))
        return y


def test_real_cpu_trace_counts_ops_and_stays_off_the_device(tmp_path):
    bench = SmallOps()
    bench.setup()
    capture_torch({"small": bench}, tmp_path, iterations=3)
    s = summarize_trace(tmp_path / "small.trace.json")
    assert s.device == "cpu"
    assert s.iterations == 3
    assert (s.kernel_count, s.launch_count) == (0, 0)
    assert s.gpu_busy_fraction is None and s.goodput is None
    ops = {op.name: op.count for op in s.top_cpu_ops}
    assert ops["aten::add"] == 21
    assert s.empty_strided_calls == 21 + 6, "each out-of-place add allocates its output, plus two direct calls"
    assert not keys(s.findings) & {"host-gaps", "small-kernels", "gpu-busy", "gpu-idle"}
