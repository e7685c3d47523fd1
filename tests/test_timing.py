"""The timing loop on a CPU: work the events miss, rotation start, warmup by time, sustained timing,
and the timing flags of the CLI."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from typer.testing import CliRunner

import aisp
from aisp import suite
from aisp.cli.main import app
from aisp.harness import execute, timing
from aisp.harness.execute import Variant, time_interleaved, warm_up
from aisp.harness.options import RunOptions
from aisp.harness.results import assemble, variant_result
from aisp.harness.timing import (
    IDLE_PROBES,
    SPACER_MAX_MS,
    SPACER_MIN_MS,
    CudaSide,
    Timed,
    grown_spacer,
    host_bound,
    spacer_ms,
    time_call,
    unseen_work,
)
from aisp.harness.verify import CheckPlan, VerificationError

CPU = torch.device("cpu")


def test_a_sync_tail_beyond_the_allowance_is_unseen_work():
    """The tail a device-wide sync waits for after the end event completed: a side-stream matmul
    (1.45 ms left), 2 ms hidden beside 4.3 ms of events (the old 50% rule passed it), ~30 us hidden in a
    30 us call (the old 50 us floor passed it)."""
    reason = unseen_work([1.45, 1.46, 1.44], [0.02, 0.02, 0.03])
    assert reason.startswith("work outside the timed stream: after the end event, a device-wide sync waited "
                             "1.450 ms (median of timed calls) beyond CUDA events of 0.020 ms")
    assert "wait_stream" in reason
    assert unseen_work([2.0] * 5, [4.3] * 5) is not None
    assert unseen_work([0.028, 0.03, 0.031], [0.03, 0.03, 0.031]) is not None
    # the paired tail of a 30 us spin left behind a 30 us call read ~17-20 us on an H200 (2026-11-28):
    # over the 10 us floor; 8 us is not
    assert unseen_work([0.017, 0.018, 0.02], [0.03] * 3) is not None
    assert unseen_work([0.008] * 3, [0.03] * 3) is None


def test_a_short_or_rare_sync_tail_is_not_unseen_work():
    """The sync's own cost (a few us), under 10% of a long call, or host jitter in a few samples only
    (ch13:precisionfp8 under load: host 6.4-17.7 ms, events 6.3 ms) is no unseen work."""
    assert unseen_work([0.006, 0.008, 0.007], [0.03, 0.03, 0.03]) is None
    assert unseen_work([0.35, 0.4, 0.38], [4.3, 4.3, 4.3]) is None
    assert unseen_work([0.005, 11.4, 0.006, 4.2, 0.005], [6.3] * 5) is None
    assert unseen_work([], []) is None
    assert unseen_work([], [1.0, 1.0]) is None  # a CPU run has no tail


def test_host_bound_when_events_barely_exceed_issue_time():
    assert host_bound([0.05, 0.05, 0.05], [0.052, 0.054, 0.05]) == pytest.approx(
        {"issue_ms": 0.05, "events_ms": 0.052, "events_over_issue": 1.04})
    assert host_bound([0.05] * 3, [0.02] * 3)["events_over_issue"] == pytest.approx(0.4)
    assert host_bound([0.05] * 3, [0.056] * 3) is None
    assert host_bound([0.01] * 3, [1.5] * 3) is None
    assert host_bound([], []) is None


def test_a_call_that_waits_for_its_device_work_is_not_host_bound():
    """ch04:dataparallel copies its loss to the host inside run(): the call returns after the 11.5 ms
    spacer and its 3.5 ms of device work (issue 14.7 ms), which the plain ratio would tag host-bound."""
    assert host_bound([14.7] * 3, [3.5] * 3) is not None  # without the spacer it looks host-bound
    assert host_bound([14.7] * 3, [3.5] * 3, spacer_ms=11.5) is None
    # a host-bound call issued under the spacer still is: the device waits for the host
    assert host_bound([0.3] * 3, [0.29] * 3, spacer_ms=0.6)["events_over_issue"] == pytest.approx(0.29 / 0.3)


def test_the_spacer_is_twice_the_issue_time_within_its_bounds():
    assert spacer_ms([0.1, 0.12, 0.5]) == pytest.approx(0.24)
    assert spacer_ms([0.005]) == SPACER_MIN_MS
    assert spacer_ms([80.0]) == SPACER_MAX_MS
    assert spacer_ms([]) == SPACER_MIN_MS


def test_a_sample_issued_past_the_spacer_grows_it_for_the_samples_after():
    assert grown_spacer(0.15, 0.12, 0.16, 1) == 0.15
    assert grown_spacer(0.15, 0.27, 0.20, 1) == pytest.approx(0.54)
    assert grown_spacer(0.15, 80.0, 100.0, 1) == SPACER_MAX_MS
    assert grown_spacer(0.0, 0.27, 0.20, 1) == 0.0  # timed from idle: no spacer to outrun
    assert grown_spacer(0.15, 0.27, 0.20, 4) == 0.15  # back to back, later calls overlap earlier device work
    # a call that waited for its device work (a sync inside run(), as ch20's serving loops do: issue 473 ms
    # beside 20 ms of spacer and 473 ms of events) is not starved, whatever its issue time
    assert grown_spacer(20.0, 473.0, 473.0, 1) == 20.0
    assert grown_spacer(0.15, 0.33, 0.20, 1) == 0.15


def test_the_loop_grows_a_starved_variants_spacer_and_counts_its_starved_samples(monkeypatch):
    """A host that issues the baseline's call in 0.27 ms past a 0.15 ms spacer (on an H200 this timed
    the host, not the GPU): the next samples get 2 x 0.27 ms; the optimized, whose call waits for its
    device work (a sync inside run()), keeps its own."""
    used: dict[str, list[float]] = {"baseline_x": [], "optimized_x": []}
    issue = {"baseline_x": [0.27, 0.1, 0.1, 0.1, 0.1], "optimized_x": [1.2] * 4}  # the optimized waits: 1.2 >= 0.15 + 0.9

    def fake_time_call(fn, device, calls, spacer, flush=None):
        name = fn()
        used[name].append(spacer)
        return Timed(None, 1.0, 1.0, issue[name][len(used[name]) - 1], 0.0)

    monkeypatch.setattr(execute, "time_call", fake_time_call)
    monkeypatch.setattr(execute, "_calls_per_sample", lambda var, options, device: (1, 0.15))
    monkeypatch.setattr(execute, "timed_functions",
                        lambda live, options, device: {id(v): (lambda n=v.name: n) for v in live})
    variants = _variants([])
    time_interleaved(variants, RunOptions(iterations=4, warmup=0, warmup_s=0.0, device="cpu"), CPU)
    base, opt = variants
    # the starved sample timed the host: taken again at once, in its slot, with the grown spacer
    assert used["baseline_x"] == pytest.approx([0.15, 0.54, 0.54, 0.54, 0.54]) and used["optimized_x"] == [0.15] * 4
    assert (base.starved_samples, base.spacer_ms, opt.starved_samples, opt.spacer_ms) == (1, pytest.approx(0.54), 0, 0.15)
    assert (base.retaken_samples, len(base.samples_ms), len(base.windows), opt.retaken_samples, len(opt.samples_ms)) == (
        1, 4, 4, 0, 4)
    assert base.issue_samples_ms == [0.1] * 4  # the starved sample's 0.27 ms is not among them


def test_a_variant_that_syncs_inside_run_keeps_its_spacer(monkeypatch):
    """ch19:fp8_moe's run() reads the expert counts with .tolist(): its issue time holds the wait for
    the spacer and the routing kernels, past any spacer; growing it would only spin longer."""
    used: list[float] = []

    def fake_time_call(fn, device, calls, spacer, flush=None):
        used.append(spacer)
        return Timed(None, 8.0, 8.0, spacer + 2.0, 0.0)  # always issued 2 ms past the spacer

    monkeypatch.setattr(execute, "time_call", fake_time_call)
    monkeypatch.setattr(execute, "_calls_per_sample", lambda var, options, device: (1, 13.0))
    monkeypatch.setattr(execute, "timed_functions", lambda live, options, device: {id(v): v.bench.run for v in live})
    variants = _variants([])[:1]
    variants[0].syncs_inside = True
    time_interleaved(variants, RunOptions(iterations=4, warmup=0, warmup_s=0.0, device="cpu"), CPU)
    assert used == [13.0] * 4 and variants[0].starved_samples == 0
    variants = _variants([])[:1]
    used.clear()
    time_interleaved(variants, RunOptions(iterations=3, warmup=0, warmup_s=0.0, device="cpu"), CPU)
    assert used == [13.0, 20.0, 20.0, 20.0] and variants[0].starved_samples == 4  # without the flag: grown to the cap, still outrun
    # the first starved sample is taken again (its spacer grew past it); at the cap nothing would grow, so they stay
    assert (variants[0].retaken_samples, len(variants[0].samples_ms)) == (1, 3)


@pytest.mark.gpu
def test_torch_sync_debug_mode_finds_a_sync_inside_a_call():
    from aisp.harness.timing import syncs_inside

    x = torch.ones(1024, device="cuda")
    assert syncs_inside(lambda: x.sum().item())
    assert not syncs_inside(lambda: x.add_(1))
    assert torch.cuda.get_sync_debug_mode() == 0


def test_starved_samples_are_named_in_the_notes():
    from aisp.harness.runner import _annotate

    starved = {**_record("optimized_x", [0.3] * 4), "starved_samples": 1, "retaken_samples": 1, "spacer_ms": 0.54}
    notes = _annotate(assemble({"name": "x"}, {}, [_record("baseline_x", [0.6] * 4), starved]), {})["notes"]
    assert notes == ["optimized_x: 1 of 5 samples: the host issued the call past the spacer's end (the GPU may "
                     "have idled in the window); the spacer grew to 0.54 ms; 1 of them taken again (they timed the host)"]


class FakeCuda(CudaSide):
    """Stands in for the GPU: logs each CUDA call; a device-wide sync costs ``sync_s`` of the fake
    clock, and the first one after the end event completed waits ``tail_s`` more (the work left);
    every event pair times ``event_ms``."""

    def __init__(self, clock: list, tail_s: float, event_ms: float = 0.5, sync_s: float = 0.0) -> None:
        self.clock, self.tail_s, self.event_ms, self.sync_s, self.log = clock, tail_s, event_ms, sync_s, []

    def synchronize(self) -> None:
        waits = self.tail_s if self.log and self.log[-1] == "end done" else 0.0
        self.log.append("sync")
        self.clock[0] += self.sync_s + waits

    def event(self) -> FakeEvent:
        return FakeEvent(self)

    def spin(self, ms: float) -> None:
        self.log.append(f"spin {ms}")


class FakeEvent:
    def __init__(self, cuda: FakeCuda) -> None:
        self.cuda = cuda

    def record(self) -> None:
        self.cuda.log.append("record")

    def synchronize(self) -> None:
        self.cuda.log.append("end done")

    def elapsed_time(self, end: FakeEvent) -> float:
        return self.cuda.event_ms


@pytest.fixture
def fake_gpu(monkeypatch):
    """A fake clock for the timing module and a FakeCuda whose syncs cost 0.05 ms (a loaded host) and
    wait 0.3 ms more after the end event; calls take 0.02 ms."""
    clock = [100.0]
    monkeypatch.setattr(timing, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    cuda = FakeCuda(clock, tail_s=0.3e-3, sync_s=0.05e-3)

    def call() -> str:
        cuda.log.append("call")
        clock[0] += 0.02e-3
        return "out"
    return cuda, call


def test_the_device_window_queues_flush_and_spacer_before_the_start_event_with_no_sync_between(fake_gpu):
    cuda, call = fake_gpu
    timed = time_call(call, CPU, 1, 0.1, lambda: cuda.log.append("flush"), cuda=cuda)
    assert cuda.log == ["sync", "flush", "spin 0.1", "record", "call", "record", "end done", "sync", "sync"]
    assert timed.output == "out" and timed.device_ms == 0.5
    # the tail is the first sync's wait less the repeated sync's (the host's cost of a sync cancels)
    assert timed.issue_ms == pytest.approx(0.02) and timed.tail_ms == pytest.approx(0.3)
    assert timed.host_ms == pytest.approx(0.37)


def test_the_idle_window_syncs_after_the_flush_and_sustained_times_one_tail_a_batch(fake_gpu):
    """A sustained batch has one tail; per call it is a third of what 3 calls left behind."""
    cuda, call = fake_gpu
    time_call(call, CPU, 1, 0.0, lambda: cuda.log.append("flush"), cuda=cuda)
    assert cuda.log[:4] == ["sync", "flush", "sync", "record"]
    cuda.log.clear()
    timed = time_call(call, CPU, 3, 0.1, cuda=cuda)
    assert cuda.log == ["sync", "spin 0.1", *["record", "call", "record"] * 3, "end done", "sync", "sync"]
    assert timed.issue_ms == pytest.approx(0.02) and timed.tail_ms == pytest.approx(0.1)


def _record(name: str, events: list[float], tails: list[float] | None = None,
            issue: list[float] | None = None) -> dict:
    return {"name": name, "file": f"/x/{name}.py", "verdict": "pending", "reason": None, "samples_ms": events,
            "host_samples_ms": events, "issue_samples_ms": issue or [], "tail_samples_ms": tails or [],
            "memory": {}, "metrics": {}}


def test_a_variant_with_unseen_work_gets_error_and_no_speedup():
    base = _record("baseline_mm", [1.50] * 5, [0.005] * 5)
    hidden = _record("optimized_mm", [0.05] * 5, [1.45] * 5)
    joined = _record("optimized_mm_joined", [1.50] * 5, [0.006] * 5)
    result = assemble({"name": "mm"}, {}, [base, hidden, joined])
    bad, good = result["variants"]
    assert bad["verdict"] == "error" and bad["speedup"] is None and "work outside the timed stream" in bad["reason"]
    assert good["verdict"] == "inconclusive" and good["speedup"]["value"] == pytest.approx(1.0)
    assert good["tail_summary"]["median"] == pytest.approx(0.006)
    assert result["verdict"] == "error" and result["best"] == "optimized_mm_joined"


def test_a_baseline_with_unseen_work_leaves_no_speedup():
    result = assemble({"name": "mm"}, {}, [_record("baseline_mm", [0.04] * 4, [1.46] * 4),
                                         _record("optimized_mm", [0.74] * 4, [0.005] * 4)])
    assert result["baseline"]["verdict"] == "error" and result["variants"][0]["speedup"] is None
    assert result["verdict"] == "error" and result["speedup"] is None


def test_work_unseen_only_in_the_untimed_calls_from_idle_is_an_error():
    """A side stream that never waits for the current one runs beside the spacer: the timed samples'
    tails are short, but the calls from idle, where nothing hides it, leave it past the end event."""
    hidden = {**_record("optimized_mm", [0.003] * 4, [0.005] * 4), "idle_probe_ms": [0.01] * 3,
              "idle_tail_ms": [0.035, 0.033, 0.2]}
    result = variant_result(hidden, {})
    assert result["verdict"] == "error" and "(median of untimed calls from idle)" in result["reason"]
    clean = {**hidden, "idle_tail_ms": [0.005, 0.006, 0.2]}
    assert variant_result(clean, {})["verdict"] == "pending"


def test_host_bound_is_tagged_in_the_result_with_its_figures():
    """ch01-like: a fused kernel of ~20 us issued in 19 us is host-bound; a 1.5 ms matmul issued in 10 us
    is not; a CPU run (no sync tails) carries no tag."""
    result = assemble({"name": "mm"}, {}, [_record("baseline_mm", [1.5] * 4, [0.005] * 4, [0.01] * 4),
                                         _record("optimized_mm", [0.02] * 4, [0.005] * 4, [0.019] * 4)])
    assert result["baseline"]["host_bound"] is None
    tag = result["variants"][0]["host_bound"]
    assert tag["issue_ms"] == pytest.approx(0.019) and tag["events_ms"] == pytest.approx(0.02)
    assert result["variants"][0]["issue_summary"]["median"] == pytest.approx(0.019)
    cpu = assemble({"name": "mm"}, {}, [_record("baseline_mm", [1.0] * 4, None, [1.0] * 4),
                                      _record("optimized_mm", [0.5] * 4, None, [0.5] * 4)])
    assert cpu["variants"][0]["host_bound"] is None


def test_a_metric_headline_compares_the_metric_and_errors_when_it_is_missing():
    """A pair that trades total time for a latency figure is judged on that figure, not on time."""
    base = {**_record("baseline_mm", [1.0] * 4), "metrics": {"gap_p99_ms": 9.0}}
    opt = {**_record("optimized_mm", [1.2] * 4), "metrics": {"gap_p99_ms": 3.0}}
    silent = _record("optimized_mm_silent", [0.5] * 4)
    result = assemble({"name": "mm"}, {"headline": "metric:gap_p99_ms"}, [base, opt, silent])
    judged, missing = result["variants"]
    assert judged["verdict"] == "ok" and judged["speedup"]["value"] == pytest.approx(3.0)
    assert missing["verdict"] == "error" and "metric:gap_p99_ms" in missing["reason"]
    assert result["best"] == "optimized_mm" and result["verdict"] == "error"
    timed = assemble({"name": "mm"}, {}, [base, opt])
    assert timed["variants"][0]["speedup"]["value"] < 1.0


def test_cold_start_groups_give_an_unpaired_interval():
    base = {**_record("baseline_mm", [2.0] * 6), "sample_groups": [[1.9] * 2, [2.0] * 2, [2.1] * 2]}
    opt = {**_record("optimized_mm", [1.0] * 6), "sample_groups": [[1.0] * 2] * 3}
    speedup = assemble({"name": "mm"}, {}, [base, opt])["speedup"]
    assert speedup["low"] == pytest.approx(1.9) and speedup["high"] == pytest.approx(2.1)


def test_the_speedup_averages_each_turn_of_the_rotation():
    """Two variants timed in turn, whoever goes first pays 10%: per-iteration ratios alternate 1.1 and
    1/1.1, and each turn of two iterations averages to exactly 1 (a variant that failed before timing,
    with no samples, is not part of the turn)."""
    slow, fast = [1.1, 1.0] * 10, [1.0, 1.1] * 10
    failed = {**_record("optimized_broken", []), "verdict": "verify-failed"}
    result = assemble({"name": "mm"}, {}, [_record("baseline_mm", slow),
                                         _record("optimized_mm", fast), failed])
    ok = result["variants"][0]["speedup"]
    assert ok["value"] == pytest.approx(1.0) and ok["high"] - ok["low"] == pytest.approx(0.0, abs=1e-9)


class Logged(aisp.Benchmark):
    """Appends (its name, the clock) to a shared log at each call; takes ``delay_s``: on a
    :class:`FakeClock` it moves that clock on, else it sleeps."""

    def __init__(self, name: str, log: list, delay_s: float = 0.0, clock: FakeClock | None = None) -> None:
        super().__init__()
        self.name, self.log, self.delay_s, self.device, self.clock = name, log, delay_s, CPU, clock

    def run(self) -> int:
        if self.clock is None:
            self.log.append((self.name, time.perf_counter()))
            time.sleep(self.delay_s)
        else:
            self.log.append((self.name, self.clock.now))
            self.clock.now += self.delay_s
        return 0


class FakeClock:
    """perf_counter for the harness's timing code (execute's and timing's ``time``), moved on only by
    the calls: what a loop does in a given time does not depend on how busy this host is (a 10 ms
    sleep took 15 ms and more on a loaded 2-core host)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = 1024.0
        clock = SimpleNamespace(perf_counter=lambda: self.now)
        monkeypatch.setattr(execute, "time", clock)
        monkeypatch.setattr(timing, "time", clock)


def _variants(log: list, delay_s: float = 0.0, clock: FakeClock | None = None) -> list[Variant]:
    variants = [Variant(Path("baseline_x.py")), Variant(Path("optimized_x.py"))]
    for var in variants:
        var.bench = Logged(var.name, log, delay_s, clock)
    return variants


def test_rotation_starts_at_a_random_variant():
    """After the untimed probe calls (IDLE_PROBES each), the first timed call is not always the baseline's."""
    options = RunOptions(iterations=2, warmup=0, warmup_s=0.0, device="cpu")
    firsts = set()
    for _ in range(16):
        log: list = []
        time_interleaved(_variants(log), options, CPU)
        firsts.add(log[2 * IDLE_PROBES][0])
        assert sorted(name for name, _ in log[:2 * IDLE_PROBES]) == sorted(["baseline_x", "optimized_x"] * IDLE_PROBES)
    assert firsts == {"baseline_x", "optimized_x"}


def test_warmup_lasts_warmup_s_as_well_as_warmup_calls(monkeypatch):
    """Calls of 2**-7 s (exact in binary) on a fake clock: 0.3 s of warm-up is 20 rotations of two
    calls, the last starting before 0.3 s were up; 3 warm-up calls and no seconds, 3 rotations."""
    clock, log = FakeClock(monkeypatch), []
    warm_up(_variants(log, 2.0**-7, clock), RunOptions(warmup=1, warmup_s=0.3), CPU, 0)
    assert len(log) == 2 * 20 and log[-2][1] - log[0][1] < 0.3 <= clock.now - log[0][1]
    log.clear()
    warm_up(_variants(log, 2.0**-7, clock), RunOptions(warmup=3, warmup_s=0.0), CPU, 0)
    assert len(log) == 2 * 3


def test_sustained_timing_runs_calls_back_to_back_per_sample(monkeypatch):
    """Sustained: one sample is many calls (about SUSTAINED_BATCH_S of them), its time per call. On a
    fake clock each call takes 2**-9 s (1.953125 ms, exact in binary): 20 ms is round(10.24) = 10 calls
    a sample. (On the real clock a loaded CI host stretched the 1 ms calls, and the samples with them.)"""
    clock, log = FakeClock(monkeypatch), []
    variants = _variants(log, 2.0**-9, clock)
    time_interleaved(variants, RunOptions(iterations=3, warmup=0, warmup_s=0.0, timing="sustained", device="cpu"),
                     CPU)
    calls = sum(1 for name, _ in log if name == "baseline_x") - IDLE_PROBES  # less the untimed calls
    assert calls == 3 * round(execute.SUSTAINED_BATCH_S / 2.0**-9) == 3 * 10
    assert variants[0].samples_ms == pytest.approx([1.953125] * 3)  # per call, not per ~20 ms sample
    assert variants[0].samples_ms == variants[0].host_samples_ms


def test_timing_flags_reach_the_core(monkeypatch):
    seen = {}
    monkeypatch.setattr(suite, "run", lambda targets, roots, options, reporter=None, ci=None: seen.update(o=options) or 0)
    result = CliRunner().invoke(app, ["bench", "run", "-t", "ch01", "--timing", "sustained", "--warmup-s", "1.5",
                                      "--cold-runs", "4"])
    assert result.exit_code == 0, result.output
    assert (seen["o"].timing, seen["o"].warmup_s, seen["o"].cold_runs) == ("sustained", 1.5, 4)
    assert CliRunner().invoke(app, ["bench", "run", "-t", "ch01", "--timing", "graph"]).exit_code == 0
    assert seen["o"].timing == "graph"
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
    timed = log[-6:]  # five samples and the checked call
    assert timed[2] != 28.0 and [timed[i] for i in (0, 1, 3, 4, 5)] == [28.0] * 5
    (_, out), = last[id(var)]()
    assert float(out.sum()) == 2 * timed[2]  # the checked call's output, on the refilled values


def test_the_checked_call_is_left_out_of_the_samples_and_named():
    """Refilling inputs and cloning them came right before the checked call: its time is not a sample.
    It is timed in addition to the run's iterations, in the order of the turn it repeats."""
    log: list = []
    variants = _variants(log)
    for var in variants:
        var.bench = Summing(log)
    options = RunOptions(iterations=4, warmup=0, warmup_s=0.0, device="cpu")
    time_interleaved(variants, options, CPU, check=CheckPlan(fresh_seed=1, refill_seed=3, at=1))
    assert len(log) == 2 * (IDLE_PROBES + 5)  # the untimed calls, four samples and the checked call
    assert all(v.checked_call == 1 and len(v.samples_ms) == len(v.issue_samples_ms) == 4 for v in variants)
    timed = log[2 * IDLE_PROBES:]
    assert [v for v in timed if v != 28.0] == timed[2:4]  # both variants' call at step 1


def test_the_loop_records_issue_times_and_sync_tails_per_sample(monkeypatch, fake_gpu):
    """Through a fake GPU: each sample keeps its issue time and the sync tail; a planted 0.3 ms tail
    beside 0.5 ms of events makes the variant an error once its record is judged."""
    cuda, _ = fake_gpu
    monkeypatch.setattr(execute, "time_call", lambda fn, device, *args: time_call(fn, device, *args, cuda=cuda))
    variants = _variants([])
    time_interleaved(variants, RunOptions(iterations=3, warmup=0, warmup_s=0.0, device="cpu"), CPU)
    for var in variants:
        assert var.samples_ms == [0.5] * 3 and var.tail_samples_ms == pytest.approx([0.3] * 3)
        assert len(var.issue_samples_ms) == 3 and var.idle_tail_ms == pytest.approx([0.3] * IDLE_PROBES)
    record = {**_record("optimized_x", variants[1].samples_ms), "tail_samples_ms": variants[1].tail_samples_ms}
    assert variant_result(record, {})["verdict"] == "error"


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


def test_graph_timing_replays_a_capture_and_falls_back_to_run_with_a_note(monkeypatch):
    """--timing graph on CUDA: each sample calls the replay of one capture; a variant whose run()
    cannot be captured keeps run() and says so. On a CPU (or per call) samples call run()."""
    def capture(fn, device):
        return (None, "RuntimeError: operation not permitted when stream is capturing") \
            if fn.__self__.name == "baseline_x" else ((lambda: "replayed"), None)
    monkeypatch.setattr(execute, "graph_replay", capture)
    base, opt = variants = _variants([])
    fns = execute.timed_functions(variants, RunOptions(timing="graph"), torch.device("cuda"))
    assert fns[id(opt)]() == "replayed" and "timed as replays of one capture" in opt.evidence.notes[0]
    assert fns[id(base)] == base.bench.run
    assert base.evidence.notes == ["--timing graph: run() could not be captured (RuntimeError: operation not "
                                   "permitted when stream is capturing); timed per call"]
    assert execute.timed_functions(variants, RunOptions(timing="graph"), CPU)[id(opt)] == opt.bench.run
    assert execute.timed_functions(variants, RunOptions(), torch.device("cuda"))[id(opt)] == opt.bench.run


def test_a_host_bound_variant_is_named_in_the_notes():
    from aisp.harness.runner import _annotate

    result = assemble({"name": "loop"}, {}, [_record("baseline_loop", [2.0] * 4, [0.005] * 4, [0.1] * 4),
                                             _record("optimized_loop", [0.3] * 4, [0.005] * 4, [1.6] * 4)])
    notes = _annotate(result, {})["notes"]
    assert [n for n in notes if "host-bound" in n] == [
        "optimized_loop: host-bound: CUDA events 0.3 ms against a host issue time of 1.6 ms; its time is device "
        "work, a caller issuing it waits about the issue time"]


def test_the_tail_rule_counts_only_the_wait_beyond_an_empty_calls():
    """A process whose every sync waits ~25 us (seen on a busy 4 x H200 host, baselines included) is no
    hidden work; ~0.5 ms past the end event beside 0.1 ms of events still is."""
    assert unseen_work([0.03] * 5, [0.12] * 5) is not None  # above the 10 us floor on its own
    assert unseen_work([0.03] * 5, [0.12] * 5, empty_ms=[0.025] * 5) is None
    reason = unseen_work([0.5] * 5, [0.1] * 5, empty_ms=[0.02] * 5)
    assert reason is not None and "0.480 ms more than after an empty call (0.020 ms)" in reason


def test_a_variants_empty_call_tails_reach_the_rule():
    base = _record("baseline_mm", [0.12] * 5, [0.03] * 5)
    opt = {**_record("optimized_mm", [0.11] * 5, [0.03] * 5), "empty_tail_ms": [0.026] * 5}
    result = assemble({"name": "mm"}, {}, [{**base, "empty_tail_ms": [0.026] * 5}, opt])
    assert result["verdict"] != "error", result["reason"]
    flagged = assemble({"name": "mm"}, {}, [base, _record("optimized_mm", [0.11] * 5, [0.03] * 5)])
    assert flagged["verdict"] == "error"  # without the empty calls, 30 us is over the floor
