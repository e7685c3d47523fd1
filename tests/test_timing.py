"""The timing loop on a CPU: work the events miss, rotation start, warmup by time, sustained timing,
and the timing flags of the CLI."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

import aisp
from aisp import suite
from aisp.cli.main import app
from aisp.harness import execute
from aisp.harness.execute import Variant, time_interleaved, warm_up
from aisp.harness.options import RunOptions
from aisp.harness.results import assemble
from aisp.harness.timing import unseen_work
from aisp.harness.verify import CheckPlan, VerificationError

CPU = torch.device("cpu")


def test_host_far_above_events_is_unseen_work():
    """A side-stream matmul: the host clock saw 1.5 ms, the current stream's events 0.02 ms."""
    reason = unseen_work([1.52, 1.50, 1.55], [0.02, 0.02, 0.03])
    assert reason.startswith("work outside the timed stream: host clock 1.520 ms vs CUDA events 0.020 ms")
    assert "wait_stream" in reason
    assert unseen_work([0.4, 0.4], [0.2, 0.2]) is not None  # half the work unseen


def test_sync_overhead_is_not_unseen_work():
    assert unseen_work([0.035, 0.04, 0.03], [0.012, 0.013, 0.012]) is None  # ~20 us of sync and launch
    assert unseen_work([1.02, 1.03], [1.0, 1.0]) is None
    assert unseen_work([0.5, 0.5], [0.5, 0.5]) is None  # a CPU run: the host clock is the time
    assert unseen_work([], []) is None


def _record(name: str, host: list[float], events: list[float]) -> dict:
    return {"name": name, "file": f"/x/{name}.py", "verdict": "pending", "reason": None, "samples_ms": events,
            "host_samples_ms": host, "memory": {}, "metrics": {}}


def test_a_variant_with_unseen_work_gets_error_and_no_speedup():
    base = _record("baseline_mm", [1.52] * 5, [1.50] * 5)
    hidden = _record("optimized_mm", [1.53] * 5, [0.05] * 5)
    joined = _record("optimized_mm_joined", [1.52] * 5, [1.50] * 5)
    result = assemble({"name": "mm"}, {}, [base, hidden, joined])
    bad, good = result["variants"]
    assert bad["verdict"] == "error" and bad["speedup"] is None and "work outside the timed stream" in bad["reason"]
    assert good["verdict"] == "ok" and good["speedup"]["value"] == pytest.approx(1.0)
    assert result["verdict"] == "error" and result["best"] == "optimized_mm_joined"


def test_a_baseline_with_unseen_work_leaves_no_speedup():
    result = assemble({"name": "mm"}, {}, [_record("baseline_mm", [1.5] * 4, [0.04] * 4),
                                         _record("optimized_mm", [0.75] * 4, [0.74] * 4)])
    assert result["baseline"]["verdict"] == "error" and result["variants"][0]["speedup"] is None
    assert result["verdict"] == "error" and result["speedup"] is None


def test_a_metric_headline_compares_the_metric_and_errors_when_it_is_missing():
    """A pair that trades total time for a latency figure is judged on that figure, not on time."""
    base = {**_record("baseline_mm", [1.0] * 4, [1.0] * 4), "metrics": {"gap_p99_ms": 9.0}}
    opt = {**_record("optimized_mm", [1.2] * 4, [1.2] * 4), "metrics": {"gap_p99_ms": 3.0}}
    silent = _record("optimized_mm_silent", [0.5] * 4, [0.5] * 4)
    result = assemble({"name": "mm"}, {"headline": "metric:gap_p99_ms"}, [base, opt, silent])
    judged, missing = result["variants"]
    assert judged["verdict"] == "ok" and judged["speedup"]["value"] == pytest.approx(3.0)
    assert missing["verdict"] == "error" and "metric:gap_p99_ms" in missing["reason"]
    assert result["best"] == "optimized_mm" and result["verdict"] == "error"
    timed = assemble({"name": "mm"}, {}, [base, opt])
    assert timed["variants"][0]["speedup"]["value"] < 1.0


def test_cold_start_groups_give_an_unpaired_interval():
    base = {**_record("baseline_mm", [2.0] * 6, [2.0] * 6), "sample_groups": [[1.9] * 2, [2.0] * 2, [2.1] * 2]}
    opt = {**_record("optimized_mm", [1.0] * 6, [1.0] * 6), "sample_groups": [[1.0] * 2] * 3}
    speedup = assemble({"name": "mm"}, {}, [base, opt])["speedup"]
    assert speedup["low"] == pytest.approx(1.9) and speedup["high"] == pytest.approx(2.1)


def test_the_speedup_averages_each_turn_of_the_rotation():
    """Two variants timed in turn, whoever goes first pays 10%: per-iteration ratios alternate 1.1 and
    1/1.1, and each turn of two iterations averages to exactly 1 (a variant that failed before timing,
    with no samples, is not part of the turn)."""
    slow, fast = [1.1, 1.0] * 10, [1.0, 1.1] * 10
    failed = {**_record("optimized_broken", [], []), "verdict": "verify-failed"}
    result = assemble({"name": "mm"}, {}, [_record("baseline_mm", slow, slow),
                                         _record("optimized_mm", fast, fast), failed])
    ok = result["variants"][0]["speedup"]
    assert ok["value"] == pytest.approx(1.0) and ok["high"] - ok["low"] == pytest.approx(0.0, abs=1e-9)


class Logged(aisp.Benchmark):
    """Appends (its name, perf_counter) to a shared log at each call; sleeps ``delay_s``."""

    def __init__(self, name: str, log: list, delay_s: float = 0.0) -> None:
        super().__init__()
        self.name, self.log, self.delay_s, self.device = name, log, delay_s, CPU

    def run(self) -> int:
        self.log.append((self.name, time.perf_counter()))
        time.sleep(self.delay_s)
        return 0


def _variants(log: list, delay_s: float = 0.0) -> list[Variant]:
    variants = [Variant(Path("baseline_x.py")), Variant(Path("optimized_x.py"))]
    for var in variants:
        var.bench = Logged(var.name, log, delay_s)
    return variants


def test_rotation_starts_at_a_random_variant():
    """After the untimed rotation (one call each), the first timed call is not always the baseline's."""
    options = RunOptions(iterations=2, warmup=0, warmup_s=0.0, device="cpu")
    firsts = set()
    for _ in range(16):
        log: list = []
        time_interleaved(_variants(log), options, CPU)
        firsts.add(log[2][0])
        assert sorted(name for name, _ in log[:2]) == ["baseline_x", "optimized_x"]
    assert firsts == {"baseline_x", "optimized_x"}


def test_warmup_lasts_warmup_s_as_well_as_warmup_calls():
    log: list = []
    warm_up(_variants(log, 0.01), RunOptions(warmup=1, warmup_s=0.3), CPU, 0)
    assert log[-1][1] - log[0][1] >= 0.3 - 0.03 and len(log) >= 2 * 10
    log.clear()
    warm_up(_variants(log, 0.01), RunOptions(warmup=3, warmup_s=0.0), CPU, 0)
    assert len(log) == 2 * 3


def test_sustained_timing_runs_calls_back_to_back_per_sample(monkeypatch):
    """Sustained: one sample is many calls (about SUSTAINED_BATCH_S of them), its time per call. The
    batch is 0.2 s here: a loaded CI host stretched the 1 ms probe call past the default 20 ms."""
    monkeypatch.setattr(execute, "SUSTAINED_BATCH_S", 0.2)
    log: list = []
    variants = _variants(log, 0.001)
    time_interleaved(variants, RunOptions(iterations=3, warmup=0, warmup_s=0.0, timing="sustained", device="cpu"),
                     CPU)
    calls = sum(1 for name, _ in log if name == "baseline_x") - 1  # less the untimed call
    assert calls >= 3 * 2 and calls % 3 == 0
    assert all(1.0 <= s < 10.0 for s in variants[0].samples_ms)  # per call, not per ~20 ms sample
    assert variants[0].samples_ms == variants[0].host_samples_ms


def test_timing_flags_reach_the_core(monkeypatch):
    seen = {}
    monkeypatch.setattr(suite, "run", lambda targets, roots, options, reporter=None, ci=None: seen.update(o=options) or 0)
    result = CliRunner().invoke(app, ["bench", "run", "-t", "ch01", "--timing", "sustained", "--warmup-s", "1.5",
                                      "--cold-runs", "4"])
    assert result.exit_code == 0, result.output
    assert (seen["o"].timing, seen["o"].warmup_s, seen["o"].cold_runs) == ("sustained", 1.5, 4)
    for bad in (["--timing", "bursty"], ["--warmup-s", "-1"], ["--cold-runs", "0"]):
        assert CliRunner().invoke(app, ["bench", "run", "-t", "ch01", *bad]).exit_code == 2


class Summing(aisp.Benchmark):
    """Logs the sum of its declared input at each call (an input-dependent workload)."""

    inputs = ("x",)

    def __init__(self, log: list) -> None:
        super().__init__()
        self.log, self.device, self.x = log, CPU, torch.arange(8.0)

    def run(self) -> torch.Tensor:
        self.log.append(float(self.x.sum()))
        return self.x * 2


def test_the_checked_call_runs_on_refilled_inputs_and_later_calls_on_the_workloads_own():
    """The checked iteration's inputs are refilled; the calls after it see the original values again
    (else an input-dependent pair, such as ch12's device_graph_launch, times another mix afterwards)."""
    log: list = []
    var = Variant(Path("baseline_s.py"))
    var.bench = Summing(log)
    plan = CheckPlan(fresh_seed=1, refill_seed=99, at=2)
    last = time_interleaved([var], RunOptions(iterations=5, warmup=0, warmup_s=0.0, device="cpu"), CPU, check=plan)
    timed = log[-5:]
    assert timed[2] != 28.0 and [timed[i] for i in (0, 1, 3, 4)] == [28.0] * 4
    (_, out), = last[id(var)]()
    assert float(out.sum()) == 2 * timed[2]  # the checked call's output, on the refilled values


def test_a_checked_call_that_changes_its_inputs_fails_when_judged():
    class Mutating(Summing):
        def run(self) -> torch.Tensor:
            self.x.add_(1.0)
            return self.x * 2

    var = Variant(Path("baseline_m.py"))
    var.bench = Mutating([])
    last = time_interleaved([var], RunOptions(iterations=3, warmup=0, warmup_s=0.0, device="cpu"), CPU,
                            check=CheckPlan(fresh_seed=1, refill_seed=5, at=1))
    with pytest.raises(VerificationError, match="changed its inputs"):
        last[id(var)]()
