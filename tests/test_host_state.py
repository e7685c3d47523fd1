"""Host state as evidence: readings around each pair, the busy rule on synthetic readings, a busy
result not judged nor stored, the explicit default CPU share, and the runner's re-run hook."""

from __future__ import annotations

import os

import numpy as np
import pytest
from conftest import good_pair_folder

from aisp.harness import host
from aisp.harness.discovery import pairs_in
from aisp.harness.options import RunOptions
from aisp.harness.results import TIMED, assemble
from aisp.harness.runner import Hooks, default_share, run_suite
from aisp.harness.scheduler import Topology
from aisp.judge import expectations

ENV = {"hardware_key": "h100", "gpu_name": "NVIDIA H100", "gpu_count": 1, "driver": "580", "cuda": "13.0",
       "torch": "2.11", "git_commit": "abc"}
STAT = "cpu  {user} 0 {system} {idle} 0 0 0 {steal} 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"


def _ticks(user: int, idle: int, steal: int) -> tuple[int, int]:
    found = host.cpu_ticks(STAT.format(user=user, system=0, idle=idle, steal=steal))
    assert found is not None
    return found


def _reading(load: float = 0.5, ticks: tuple[int, int] | None = (1000, 0), pids: tuple[int, ...] | None = ()):
    return host.Reading(load, ticks, pids)


def test_proc_stat_line_gives_all_ticks_and_steal():
    assert host.cpu_ticks(STAT.format(user=50, system=10, idle=900, steal=40)) == (1000, 40)
    assert host.cpu_ticks("intr 1 2 3\n") is None


def test_a_quiet_host_is_not_busy():
    state = host.state(_reading(3.0, _ticks(100, 900, 0), (42,)), _reading(3.5, _ticks(200, 1800, 10), (42,)),
                       cores=4, own=[42])
    assert state["busy"] == [] and state["gpu_processes"] == [] and state["steal"] == pytest.approx(10 / 1010)


@pytest.mark.parametrize(("before", "after", "busy"), [(9.0, 8.5, True), (9.0, 3.0, False), (2.0, 9.0, False)])
def test_load_above_the_cores_at_both_readings_is_busy(before, after, busy):
    state = host.state(_reading(before), _reading(after), cores=4)
    assert bool(state["busy"]) is busy, state
    if busy:
        assert state["busy"] == ["1-min load 8.5 above the host's 4 cores before and after the pair"]


def test_another_process_on_the_pairs_gpu_is_busy_but_this_runs_own_are_not():
    state = host.state(_reading(pids=(7, 900)), _reading(pids=(7,)), cores=8, own=[7])
    assert state["gpu_processes"] == [900] and state["busy"] == ["other process(es) on the pair's GPU: pid 900"]
    unknown = host.state(_reading(pids=None), _reading(pids=None), cores=8)
    assert unknown["gpu_processes"] is None and unknown["busy"] == []


def test_cpu_steal_above_five_percent_is_busy():
    state = host.state(_reading(ticks=_ticks(0, 1000, 0)), _reading(ticks=_ticks(500, 1400, 100)), cores=8)
    assert state["steal"] == pytest.approx(0.1) and state["busy"] == ["CPU steal 10.0% over the pair (limit 5%)"]
    calm = host.state(_reading(ticks=_ticks(0, 1000, 0)), _reading(ticks=_ticks(500, 1460, 40)), cores=8)
    assert calm["busy"] == []


def test_schedstat_sums_every_threads_cpu_and_run_queue_time(tmp_path):
    for tid, fields in (("101", "3000000000 500000000 40"), ("102", "1000000000 1500000000 7")):
        (tmp_path / tid).mkdir()
        (tmp_path / tid / "schedstat").write_text(fields + "\n")
    assert host.schedstat(tmp_path) == (4_000_000_000, 2_000_000_000)
    assert host.schedstat(tmp_path / "none") is None
    assert host.cpu_wait((1_000_000_000, 0), (4_000_000_000, 2_000_000_000)) == {"ran_s": 3.0, "waited_s": 2.0}
    assert host.cpu_wait(None, (1, 1)) is None


@pytest.mark.parametrize(("ran", "waited", "busy"), [(0.5, 2.0, True), (0.5, 1.4, False), (0.01, 1.0, False)])
def test_a_pair_whose_threads_waited_for_a_cpu_over_three_times_as_long_as_they_ran_is_busy(ran, waited, busy):
    """Over the limit it got under a quarter of the CPU it asked for; a pair that barely ran is not judged by it."""
    state = host.state(_reading(), _reading(), cores=8, waits={"ran_s": ran, "waited_s": waited})
    assert bool(state["busy"]) is busy, state
    assert state["cpu_wait"] == {"ran_s": ran, "waited_s": waited}
    if busy:
        assert state["busy"] == ["the pair's threads waited 2.00 s for a CPU against 0.50 s on one while timed (limit 3x)"]


def test_a_multi_rank_pair_is_judged_by_its_most_starved_rank():
    ranks = [{"ran_s": 2.0, "waited_s": 1.0}, None, {"ran_s": 0.5, "waited_s": 1.9}]
    assert host.worst_wait(ranks) == {"ran_s": 0.5, "waited_s": 1.9}
    assert host.worst_wait([None, None]) is None


def test_a_thread_sharing_its_cpu_with_five_spinning_processes_reads_as_starved():
    """The real reading: this thread and five busy loops pinned to one CPU; the scheduler gives it
    about a sixth of that CPU, so it waits about five times as long as it runs (no wall-clock figure
    is asserted: the ratio is the scheduler's share)."""
    import subprocess
    import sys

    if not hasattr(os, "sched_setaffinity") or host.schedstat() is None:
        pytest.skip("no per-thread schedstat or CPU affinity here")
    cpu = min(os.sched_getaffinity(0))
    spin = f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nprint('spinning', flush=True)\nwhile True: pass"
    spinners = [subprocess.Popen([sys.executable, "-c", spin], stdout=subprocess.PIPE, text=True) for _ in range(5)]
    allowed = os.sched_getaffinity(0)
    try:
        # each spinner is on the CPU (a fixed sleep was no proof on a busy host: a late spinner's
        # Python still starting left this thread a larger share than the rule's limit)
        assert [proc.stdout.readline().strip() for proc in spinners] == ["spinning"] * 5
        os.sched_setaffinity(0, {cpu})
        before = host.schedstat()
        while (after := host.schedstat())[0] - before[0] < 0.2e9:  # until this process ran 0.2 s of CPU
            pass
        waits = host.cpu_wait(before, after)
    finally:
        os.sched_setaffinity(0, allowed)
        for proc in spinners:
            proc.kill()
            proc.wait()
    assert host.state(_reading(), _reading(), cores=8, waits=waits)["busy"], waits


def test_the_dispatch_probe_reads_a_positive_cost_per_op():
    """The host-speed probe (aisp peak's dispatch_torch_op too): no wall-clock figure is asserted here."""
    assert host.dispatch_us(calls=50, repeats=3) > 0


@pytest.mark.skipif(not host.THREAD_STAT.exists() or not hasattr(os, "sched_setaffinity"), reason="Linux only")
def test_the_cpu_the_probe_ran_on_is_the_one_the_thread_is_pinned_to():
    """current_cpu reads the calling thread's CPU: pinned to each allowed CPU in turn, it names that one."""
    allowed = os.sched_getaffinity(0)
    try:
        for cpu in sorted(allowed):
            os.sched_setaffinity(0, {cpu})
            assert host.current_cpu() == cpu
    finally:
        os.sched_setaffinity(0, allowed)


def test_the_cpu_reading_is_none_where_the_file_cannot_be_read(tmp_path, monkeypatch):
    monkeypatch.setattr(host, "THREAD_STAT", tmp_path / "absent")
    assert host.current_cpu() is None
    (tmp_path / "absent").write_text("12 (a) b) S 1")  # a name with ')' and too few fields
    assert host.current_cpu() is None


def test_the_default_share_is_the_physical_cores_split_among_the_ranks():
    """One pair at a time: torch's own default (physical cores), at most the cores allowed, per rank."""
    big = Topology(cpu_count=64)
    assert default_share(big, 1, physical=32).threads == 32
    assert default_share(big, 2, physical=32).threads == 16
    assert default_share(Topology(cpu_count=8), 1, physical=32).threads == 8
    assert default_share(Topology(cpu_count=2), 4, physical=1).threads == 1
    assert default_share(big, 1, physical=32).env()["OMP_NUM_THREADS"] == "32"


def _result(folder, name, opt_ms, seed, busy=()):
    rng = np.random.default_rng(seed)
    raw = [{"name": f"baseline_{name}", "verdict": "pending", "memory": {}, "samples_ms": list(10 * (1 + rng.normal(0, 0.01, 30)))},
           {"name": f"optimized_{name}", "verdict": "pending", "memory": {},
            "samples_ms": list(opt_ms * (1 + rng.normal(0, 0.01, 30)))}]
    pair = {"target": f"{folder.name}:{name}", "group": folder.name, "name": name,
            "files": [str(folder / f"baseline_{name}.py")]}
    result = assemble(pair, {"headline": "time", "requires": {"gpus": 1, "ranks": 1}}, raw)
    return {**result, "host": {"load_1m": [9.0, 9.0], "cores": 4, "steal": 0.0, "gpu_processes": [], "busy": list(busy)}}


def test_a_busy_result_keeps_its_figures_and_is_neither_judged_nor_stored(tmp_path):
    expectations.update([_result(tmp_path, "a", 5, seed=1)], ENV)
    busy = _result(tmp_path, "a", 8, seed=2, busy=["1-min load 9.0 above the host's 4 cores before and after the pair"])
    judged = expectations.judge(busy, ENV)
    outcome = judged["expectation"]
    assert judged["verdict"] == "ok" and outcome["status"] == "not-compared" and outcome["why"] == "host busy"
    assert outcome["detail"] == "host busy: 1-min load 9.0 above the host's 4 cores before and after the pair"
    assert outcome["host"]["load_1m"] == [9.0, 9.0] and judged["speedup"]["value"] < 1.3
    assert expectations.update([busy], ENV) == []
    assert expectations.refused([busy]) == [f"{tmp_path.name}:a: not stored in expectations: {outcome['detail']}"]
    quiet = expectations.judge(_result(tmp_path, "a", 8, seed=2), ENV)
    assert quiet["verdict"] == "regressed", "the same figures on a quiet host are judged"


def test_the_runner_records_the_host_the_default_share_and_re_runs_on_request(tmp_path, monkeypatch):
    """One pair through run_suite: a fake NVML hook names a foreign process, so the result is busy;
    the default (one pair at a time) share sets the threads to the cores this process may use; the
    confirm hook's ``again`` runs the pair once more in a fresh process with its own host readings."""
    mine = good_pair_folder(tmp_path)
    asked = []

    def confirm(result, ctx, again):
        asked.append(ctx.work_dir.name)
        return {**result, "reruns": [again(0)]}
    hooks = Hooks(gpu_pids=lambda share, gpus: [2**22 + 1], confirm=confirm)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))  # a loaded CI host would read busy too
    monkeypatch.setattr(host, "PROC_STAT", tmp_path / "no_proc_stat")  # and a VM's steal
    monkeypatch.setattr(host, "STARVED_LIMIT", float("inf"))  # and threads waiting for a CPU
    options = RunOptions(device="cpu", iterations=3, warmup=1, warmup_s=0, artifacts_dir=tmp_path / "runs")
    (result,), run_dir = run_suite(pairs_in(mine), options, hooks=hooks)
    waits = result["host"]["cpu_wait"]  # the worker read its threads' schedstat around the timed iterations
    assert result["host"]["dispatch_us"] > 0, "the worker read the host's op dispatch cost after its samples"
    assert result["host"]["dispatch_cpu"] in range(os.cpu_count() or 1), "and the CPU it read it on"
    if host.schedstat() is not None:  # Linux
        assert waits["ran_s"] > 0 and waits["waited_s"] >= 0
    assert result["host"]["gpu_processes"] == [2**22 + 1]
    assert result["host"]["busy"] == [f"other process(es) on the pair's GPU: pid {2**22 + 1}"]
    assert result["notes"][-1] == f"host busy: other process(es) on the pair's GPU: pid {2**22 + 1}"
    assert result["placement"]["threads"] == default_share(Topology(), 1).threads == result["placement"]["applied"]["threads"]
    assert asked == ["mine_good"] and len(result["reruns"]) == 1
    rerun = result["reruns"][0]
    assert rerun["verdict"] in TIMED and rerun["host"]["busy"] and (run_dir / "mine_good" / "rerun0").is_dir()


def test_the_runs_own_exited_worker_still_listed_by_nvml_is_not_busy(tmp_path, monkeypatch):
    """NVML lists a worker for a moment after it exited: the hook names the pair's own worker (the
    process the runner started, gone from its tree by the second reading); the host is not busy."""
    mine = good_pair_folder(tmp_path)
    monkeypatch.setattr(host, "_STARTED", set())
    listed = []

    def hook(share, gpus):  # before the pair: nothing; after: every pid this run started
        listed.append(sorted(host._STARTED))
        return list(host._STARTED)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    monkeypatch.setattr(host, "PROC_STAT", tmp_path / "no_proc_stat")
    monkeypatch.setattr(host, "STARVED_LIMIT", float("inf"))
    options = RunOptions(device="cpu", iterations=3, warmup=1, warmup_s=0, artifacts_dir=tmp_path / "runs")
    (result,), _ = run_suite(pairs_in(mine), options, hooks=Hooks(gpu_pids=hook))
    assert listed[-1], "the runner remembers the worker it started"
    assert result["host"]["busy"] == [] and result["host"]["gpu_processes"] == []


HOLDER = """
import sys, time, torch
x = torch.ones(1, device="cuda")
torch.cuda.synchronize()
print("ready", flush=True)
time.sleep(60)
"""


@pytest.mark.gpu
def test_nvml_names_a_process_holding_the_pairs_gpu():
    """On a GPU host: the suite's NVML hook sees a CUDA context another process holds on GPU 0,
    and the host is busy by it; once that process is gone, it is not listed."""
    import subprocess
    import sys

    from aisp import suite
    from aisp.harness.scheduler import Share

    proc = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        pids = suite.gpu_pids(Share(), 1)
        assert pids is not None, "NVML could not list the GPU's processes"
        reading = host.read(pids)
        assert host.state(reading, reading, cores=10**6)["busy"], "a context NVML lists counts (in a PID namespace NVML shows host pids)"
    finally:
        proc.kill()
        proc.wait()
    quiet = host.read(suite.gpu_pids(Share(), 1))
    assert not host.state(quiet, quiet, cores=10**6, own=[os.getpid()])["busy"]
