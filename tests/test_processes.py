"""No process a run starts outlives it: a pair's detached child after a timeout or a normal finish,
and the worker and its children when `aisp bench run` gets Ctrl-C or SIGTERM."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from conftest import REPO

from aisp.harness.discovery import resolve_targets
from aisp.harness.options import RunOptions
from aisp.harness.runner import Budget, run_suite

PROCESSES = Path(__file__).resolve().parent / "fixtures" / "processes"


def recorded(pid_file: Path) -> list[int]:
    """The pids the fixture pairs wrote: each worker's and each detached sleeper's."""
    return [int(line) for line in pid_file.read_text().split()] if pid_file.exists() else []


def running(pids: list[int]) -> list[str]:
    """``pid status`` of each pid that still runs (a zombie has ended and holds nothing)."""
    alive = []
    for pid in pids:
        try:
            status = psutil.Process(pid).status()
        except psutil.NoSuchProcess:
            continue
        if status != psutil.STATUS_ZOMBIE:
            alive.append(f"{pid} {status}")
    return alive


@pytest.fixture
def pid_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Where the fixture pairs record their pids; whatever a failing test left running is killed."""
    path = tmp_path / "pids.txt"
    monkeypatch.setenv("AISP_TEST_PIDS", str(path))
    yield path
    for pid in recorded(path):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("name, verdicts, reuse", [("leaves_child", ("ok-unchecked", "slower"), False),
                                                  ("hangs_with_child", ("timeout",), False),
                                                  ("hangs_with_child", ("timeout",), True)])
def test_no_child_of_a_pair_outlives_it(name: str, verdicts: tuple[str, ...], reuse: bool, pid_file: Path,
                                        tmp_path: Path):
    """leaves_child finishes (ok; slower when a busy CPU slows one side of its A/A timing); a reused
    worker that times out is ended with everything it started, as a fresh one is. hangs_with_child's 8 s
    limit is quartered to 2 s (as test_fork_workers.py does): the fixture records its worker and sleeper before the
    worker reports that limit, so only the wait for the timeout gets shorter."""
    pairs = resolve_targets([f"processes:{name}"], REPO, (PROCESSES,))
    results, _ = run_suite(pairs, RunOptions(iterations=2, warmup=0, artifacts_dir=tmp_path / "artifacts",
                                             reuse_workers=reuse,
                                             timeout_multiplier=0.25 if name == "hangs_with_child" else 1.0))
    assert results[0]["verdict"] in verdicts, results[0]["reason"]
    pids = recorded(pid_file)
    assert len(pids) >= 2, "the fixture recorded its worker and a sleeper"
    assert running(pids) == []


def test_a_pair_stopped_by_the_suites_deadline_says_so(pid_file: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch):
    """A hanging pair whose own limit is far off (x20) is stopped when --suite-timeout runs out, with
    that reason (not its own timeout), and nothing it started is left. The suite's 2 s apply once the
    fixture recorded its worker and sleeper (until then the runner's limit is 300 s), as
    tests/test_distributed.py holds its hang's limit: a busy host may take longer than that to start
    the worker, which would then be ended before it started anything (the deadline was 8 s, waited out
    in full)."""
    real = Budget.limit

    def limit(self: Budget, declared: float | None, started: float) -> float:
        return real(self, declared, started) if len(recorded(pid_file)) >= 2 else 300.0
    monkeypatch.setattr(Budget, "limit", limit)
    pairs = resolve_targets(["processes:hangs_with_child"], REPO, (PROCESSES,))
    results, _ = run_suite(pairs, RunOptions(iterations=2, warmup=0, artifacts_dir=tmp_path / "artifacts",
                                             timeout_multiplier=20, suite_timeout=2))
    assert len(recorded(pid_file)) >= 2, "the fixture recorded its worker and a sleeper"
    assert results[0]["verdict"] == "timeout"
    assert "the suite's time limit (--suite-timeout) ran out" in results[0]["reason"], results[0]["reason"]
    assert running(recorded(pid_file)) == []


def interrupt_when_recorded(cmd: list[str], env: dict[str, str], pid_file: Path, count: int,
                            sig: signal.Signals) -> None:
    """Start the CLI, send it ``sig`` once the fixture pairs recorded ``count`` pids (workers and
    sleepers), and check it ended every one of them with exit 128 + sig and one line."""
    cli = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while len(recorded(pid_file)) < count and time.monotonic() < deadline and cli.poll() is None:
        time.sleep(0.1)
    assert len(recorded(pid_file)) >= count, "the workers started their sleepers"
    cli.send_signal(sig)
    _, err = cli.communicate(timeout=30)
    assert cli.returncode == 128 + sig, err
    lines = err.strip().splitlines()
    assert lines[-1].startswith(f"aisp: interrupted by {sig.name}") and "Traceback" not in err, err
    assert running(recorded(pid_file)) == []


@pytest.mark.parametrize("sig, reuse", [(signal.SIGINT, []), (signal.SIGTERM, []), (signal.SIGINT, ["--reuse-workers"]),
                                       (signal.SIGTERM, ["--fork-workers"])])
def test_interrupted_cli_stops_every_process(sig: signal.Signals, reuse: list[str], pid_file: Path, tmp_path: Path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "aisp", "bench", "run", "--root", str(PROCESSES), "-t", "processes:hangs_with_child",
           "--timeout-multiplier", "20", "--artifacts-dir", str(tmp_path / "artifacts"), *reuse]
    interrupt_when_recorded(cmd, env, pid_file, 2, sig)


@pytest.mark.parametrize("reuse", [[], ["--reuse-workers"], ["--fork-workers"]])
def test_a_sigkilled_cli_takes_its_worker_with_it(reuse: list[str], pid_file: Path, tmp_path: Path):
    """SIGKILL gives the CLI no chance to clean up: the worker asked Linux to kill it when its parent
    dies (PR_SET_PDEATHSIG; a reused worker watches its parent's pid instead; a forked one dies with
    its zygote, which ends at EOF from the CLI), so it does not hold the GPU on. (Its detached sleeper, in a session of its own, is out of that reach; the fixture kills it.)"""
    if not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux's")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "aisp", "bench", "run", "--root", str(PROCESSES), "-t", "processes:hangs_with_child",
           "--timeout-multiplier", "20", "--artifacts-dir", str(tmp_path / "artifacts"), *reuse]
    cli = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 90
    while len(recorded(pid_file)) < 2 and time.monotonic() < deadline and cli.poll() is None:
        time.sleep(0.1)
    worker = recorded(pid_file)[0]
    cli.kill()
    cli.wait(timeout=15)
    deadline = time.monotonic() + 60  # a bound for a broken test only: a reused worker looks every 0.5 s
    while running([worker]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert running([worker]) == []


def test_a_token_carrier_adopted_by_init_is_ended_too():
    """A process carrying a worker's token that is no descendant of the runner (init adopted it) is
    ended too. Once, in a full run on two busy cores, a sleeper outlived its timed-out forked worker;
    the cause is not established, and the runner now ends every token carrier wherever it sits."""
    import ctypes

    from aisp.harness import runner

    token = f"orphan-{os.getpid()}-{time.time_ns()}"
    env = {**os.environ, runner.WORKER_TOKEN: token}
    libc, flag = ctypes.CDLL(None), ctypes.c_int(0)
    libc.prctl(37, ctypes.byref(flag), 0, 0, 0)  # PR_GET_CHILD_SUBREAPER: set if this process ran a suite
    libc.prctl(36, 0, 0, 0, 0)  # not a subreaper while the orphan is made, so init adopts it
    try:
        shell = subprocess.run(["sh", "-c", "sleep 600 >/dev/null 2>&1 & echo $!"], env=env, capture_output=True,
                               text=True, start_new_session=True, check=True)
    finally:
        libc.prctl(36, flag.value, 0, 0, 0)
    orphan = psutil.Process(int(shell.stdout.strip()))
    try:
        assert orphan.is_running() and orphan.pid not in {p.pid for p in runner.descendants(token)}
        worker = subprocess.Popen(["sleep", "600"], start_new_session=True)  # a worker stopped at its timeout
        runner._end_tree(worker, token)
        assert worker.poll() is not None
        assert not orphan.is_running() or orphan.status() == psutil.STATUS_ZOMBIE
    finally:
        with contextlib.suppress(psutil.Error):
            orphan.kill()
