"""--fork-workers: each pair's fresh worker is forked from a zygote that imported torch and the harness
once; the results are those of workers started anew, and nothing outlives the run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import FORKED_AND_REUSED_OPTIONS, FORKED_AND_REUSED_PAIRS, run_named_pairs
from test_reuse_workers import FIXTURES, _evidence, _outcome, fixed_plan  # noqa: F401 - a fixture

from aisp.harness.options import RunOptions
from aisp.harness.zygote import Zygote

NAMES = FORKED_AND_REUSED_PAIRS


@pytest.mark.usefixtures("fixed_plan")
def test_forked_workers_give_the_spawned_workers_verdicts_and_evidence(tmp_path, spawned_fixture_pairs):
    """The fixture pairs (right, wrong, crashing, raising) both ways: the same verdicts, reasons and
    verification figures (same plan, same CPU arithmetic); every forked pair says so in its placement.
    The spawned run is the session's one (conftest.spawned_fixture_pairs, shared with test_reuse_workers.py)."""
    spawned = spawned_fixture_pairs
    forked = run_named_pairs(FIXTURES / "pairs", NAMES, RunOptions(**FORKED_AND_REUSED_OPTIONS, artifacts_dir=tmp_path / "b",
                                                        fork_workers=True))
    for name, alone in spawned.items():
        assert _outcome(forked[name]) == _outcome(alone), name
        assert _evidence(forked[name]) == _evidence(alone), name
        assert alone["placement"]["forked"] is False
    assert all(forked[n]["placement"]["forked"] for n in NAMES if n != "aborts")  # aborts dies: no result doc
    assert forked["constant"]["verdict"] == "verify-failed" and _outcome(forked["good"]) == ("timed", None)
    run_dir = next((tmp_path / "b").iterdir())
    assert (run_dir / "zygote.log").exists()


@pytest.fixture(scope="module")
def zygote(tmp_path_factory):
    """One zygote for the tests that look at a zygote itself (its start imports torch and the compile
    stack: seconds of CPU a start)."""
    started = Zygote({**os.environ}, Path.cwd(), tmp_path_factory.mktemp("zygote") / "zygote.log")
    yield started
    started.close()


def test_each_forked_worker_is_a_new_process_of_the_zygote(zygote, tmp_path):
    try:
        spec = tmp_path / "missing.json"  # the worker fails at once: it reads its spec first
        children = [zygote.fork(spec, {**os.environ, "AISP_FIXTURE": str(i)}, tmp_path / f"{i}.log", tmp_path)
                    for i in range(2)]
        assert len({c.pid for c in children}) == 2 and zygote.proc.pid not in {c.pid for c in children}
        for child in children:
            while child.poll() is None:  # the zygote reaps it and reports its exit
                time.sleep(0.05)
            assert child.returncode == 70  # the child's catch-all: a missing spec is a traceback in its log
        assert "FileNotFoundError" in (tmp_path / "0.log").read_text()
    finally:
        zygote.close()  # what it imported stays readable for the compile-stack test
    assert zygote.proc.returncode == 0  # EOF ends it


@pytest.mark.parametrize("name, verdicts", [("hangs_with_child", ("timeout",))])
def test_a_forked_worker_that_times_out_leaves_nothing(name, verdicts, tmp_path, monkeypatch):
    """The pair's 8 s limit quartered (2 s): a forked worker imports nothing but the pair's files (the fixture
    records the worker and its sleeper before the worker reports that limit)."""
    from conftest import REPO
    from test_processes import PROCESSES, recorded, running

    from aisp.harness.discovery import resolve_targets
    from aisp.harness.runner import run_suite

    pid_file = tmp_path / "pids.txt"
    monkeypatch.setenv("AISP_TEST_PIDS", str(pid_file))
    pairs = resolve_targets([f"processes:{name}"], REPO, (PROCESSES,))
    results, _ = run_suite(pairs, RunOptions(iterations=2, warmup=0, artifacts_dir=tmp_path / "artifacts",
                                             fork_workers=True, timeout_multiplier=0.25))
    try:
        assert results[0]["verdict"] in verdicts, results[0]["reason"]
        assert len(recorded(pid_file)) >= 2, "the fixture recorded its worker and a sleeper"
        assert running(recorded(pid_file)) == []
    finally:
        for pid in recorded(pid_file):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_zygote_that_cannot_start_is_an_oserror_and_the_run_starts_workers_anew(tmp_path, monkeypatch):
    """A zygote whose imports fail (here: a torch that cannot be imported, first on its path) is
    reported, and a --fork-workers run then starts each worker anew (placement.forked false)."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise ImportError('no torch for this zygote')\n")
    broken = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(Path(__file__).parents[1])])}
    with pytest.raises(OSError, match="did not start"):
        Zygote(broken, tmp_path, tmp_path / "zygote.log")
    assert "no torch for this zygote" in (tmp_path / "zygote.log").read_text()

    from aisp.harness import runner

    monkeypatch.setattr(runner, "Zygote", lambda env, cwd, log: (_ for _ in ()).throw(OSError("no zygote here")))
    options = RunOptions(iterations=3, warmup=1, warmup_s=0.0, device="cpu", confirm_runs=0, fork_workers=True,
                         artifacts_dir=tmp_path / "runs")
    result = run_named_pairs(FIXTURES / "pairs", ["raises"], options)["raises"]
    assert result["placement"]["forked"] is False and result["verdict"] == "error"



def test_the_zygote_imports_the_compile_stack_once_for_its_children(zygote):
    """torch._dynamo (Triton too where installed) is imported by the zygote, not by each pair; never
    Inductor's compile_fx, after whose import a forked child cannot start CUDA (seen on an H200)."""
    assert "torch._dynamo" in zygote.imported and "torch._inductor.compile_fx" not in zygote.imported


def test_a_share_applied_after_inductor_was_imported_recounts_its_compile_threads(monkeypatch):
    """A zygote's child imported Inductor on every core; its CPU share (one core here) sets the compile
    workers again, as a worker that imports Inductor after the share would count them."""
    import torch._inductor.config as inductor

    from aisp.harness import scheduler

    before = os.sched_getaffinity(0)
    one = min(before)
    monkeypatch.setenv(scheduler.CPUS_ENV, str(one))
    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    monkeypatch.setattr(inductor, "compile_threads", 32)
    try:
        share = scheduler.apply_share_from_env()
        assert share["cpus"] == str(one) and inductor.compile_threads == 1
    finally:
        for tid in os.listdir("/proc/self/task"):
            try:
                os.sched_setaffinity(int(tid), before)
            except OSError:
                continue


POISONS = """
import torch
from aisp.harness import forking

assert not forking.fork_poisoned(), "a new Python that only imported torch"
real = torch.cuda._is_in_bad_fork
torch.cuda._is_in_bad_fork = lambda: True  # what a child inherits once this process queried the CUDA driver
assert forking.fork_poisoned(), "CUDA"
torch.cuda._is_in_bad_fork = real
torch.set_num_threads(2)
torch.ones(1 << 20).add_(1)  # OpenMP's threads started here
forking.PROBE_S = 0.5  # the child hangs (it never ends): no need to wait longer
assert forking.fork_poisoned(), "CPU threads"
print("seen")
"""


def test_a_poisoned_fork_is_seen_before_any_pair_is_forked():
    """An import that queries the CUDA driver leaves torch.cuda.is_initialized() False but every later
    fork bad (every pair of a 4 x H200 run failed so, 2026-11-28); and once a parallel CPU op started
    GNU OpenMP's threads, a child's first parallel op waits for them for ever: the zygote (and
    torchrun's agent, before it forks the ranks) asks a child first. Asked in a new Python: this
    one's CPU threads may be running (another test's parallel op)."""
    done = subprocess.run([sys.executable, "-c", POISONS], cwd=Path(__file__).resolve().parents[1],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "seen", done.stderr
