"""The suite runner: each pair in its own subprocess, killed with its process group on timeout.

With ``--gpus`` several workers run at once, one per GPU (or GPU group), each from a thread of its
own (:mod:`aisp.harness.scheduler` places them); results are written and reported from the calling
thread, in the order pairs finish, and the summary lists them in the order they were asked for."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from aisp.harness import environment, host
from aisp.harness.artifacts import new_run_dir, write_pair, write_summary
from aisp.harness.benchmark import Workload
from aisp.harness.discovery import Pair
from aisp.harness.distributed import PARENT_PID_ENV
from aisp.harness.options import RunOptions
from aisp.harness.phases import pair_phases
from aisp.harness.results import assemble, failed
from aisp.harness.resume import INTERRUPTED, NOT_STARTED, SUITE_RAN_OUT, Part, PartLog, holding
from aisp.harness.scheduler import NO_SHARE, Events, Hint, Outcome, Share, Topology, cpu_shares, run_jobs
from aisp.harness.timing import SAMPLE_KEYS
from aisp.harness.verify import CheckPlan
from aisp.harness.zygote import Forked, Zygote

PACKAGE_PARENT = Path(__file__).resolve().parents[2]
DEFAULT_TIMEOUT_S = Workload.timeout_s
KILL_GRACE_S = 5.0
WORKER_TOKEN = "AISP_WORKER_TOKEN"
"""Set in each worker's environment (a fresh value per worker): every process it starts inherits it."""

PostStep = Callable[[dict[str, Any], "PairContext"], dict[str, Any]]
Again = Callable[[int], dict[str, Any]]
"""Runs the pair once more (re-run ``i``) in fresh processes on the same GPUs and share; returns its result."""


@dataclass(frozen=True)
class PairContext:
    """What a post step may read about the pair it amends."""

    manifest: dict[str, Any]
    """The run's environment manifest (hardware key, versions)."""
    work_dir: Path
    """The pair's artifact folder (logs/, profiles/)."""


@dataclass(frozen=True)
class Hooks:
    """How tools outside the harness join a run without the harness importing them."""

    on_timed: str | None = None
    """``module:function`` the worker calls after timing as ``fn({name: bench}, out_dir)``
    (the profiler's capture); imported by name in the worker process."""
    post: tuple[PostStep, ...] = ()
    """Steps applied in order to each finished result (roofline, profiles, expectations)."""
    finish: Callable[[Path, list[dict[str, Any]]], None] | None = None
    """Called with the run folder and every result once the JSON is written (Markdown/CSV tables)."""
    topology: Topology = field(default_factory=Topology)
    """The GPUs of a ``--gpus`` run (aisp.system.gpu_topology); none: one pair at a time, as before."""
    hints: Mapping[str, Hint] = field(default_factory=dict)
    """Each pair's GPU count and expected seconds by slug (from stored expectations), for the schedule."""
    gpu_pids: Callable[[Share, int], Iterable[int] | None] | None = None
    """The processes with a compute context on a worker's GPUs (its share, and its GPU count where the
    share names none), None when NVML cannot say; read before and after each pair (host busy)."""
    confirm: Callable[[dict[str, Any], PairContext, Again], dict[str, Any]] | None = None
    """Called in the pair's job (holding its GPUs) with its result: may re-run it (``--confirm-runs``)
    and returns the result with what it found."""


class Reporter:
    """What a run tells its display (aisp.report.console); this base shows nothing (tests, library use)."""

    def start(self, pairs: list[Pair], earlier: int = 0, total: int | None = None) -> None:
        """The pairs this part runs; a resumed part adds how many of the run's ``total`` finished earlier."""
    def pair_started(self, pair: Pair, where: str = "") -> None:
        """``where``: the GPUs it runs on ("GPU 2", "GPUs 0,1"), "" in a one-at-a-time run."""
    def pair_step(self, pair: Pair, step: str) -> None:
        """The step a running pair's worker entered (setup, verify, warmup, timed, memory...)."""
    def pair_done(self, result: dict[str, Any]) -> None: ...
    def finish(self, results: list[dict[str, Any]], run_dir: Path) -> None: ...


def _signal_name(code: int) -> str:
    return next((sig.name for sig in signal.Signals if sig == -code), f"signal {-code}")


def _log_tail(log: Path, lines: int = 15) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else ""


@dataclass(frozen=True)
class Budget:
    """How long a worker may run: its workload's timeout_s (which the worker reports once it has
    loaded the pair; DEFAULT_TIMEOUT_S until then) times the multiplier, capped by the suite's
    deadline."""

    multiplier: float = 1.0
    deadline: float | None = None

    def limit(self, declared: float | None, started: float) -> float:
        """Seconds from ``started`` (monotonic) the worker may run. (Until 2026-11-28 the deadline's
        part was measured from now, not from the start, which stopped a pair halfway to it.)"""
        limit = (declared or DEFAULT_TIMEOUT_S) * self.multiplier
        return limit if self.deadline is None else min(limit, self.deadline - started)

    def suite_ran_out(self) -> bool:
        """Whether the suite's deadline has passed (a pair stopped then did not exceed its own limit)."""
        return self.deadline is not None and time.monotonic() >= self.deadline


def spawn(spec: dict[str, Any], work_dir: Path, budget: Budget, tag: str, share: Share = NO_SHARE,
          stop: threading.Event | None = None, module: str = "aisp.harness.worker",
          on_phase: Callable[[str], None] | None = None, zygote: Zygote | None = None) -> tuple[dict | None, str, str]:
    """Run one worker (``python -m module SPEC.json``; a tool's own worker, e.g. ``aisp.check.worker``,
    follows the same protocol) with its GPUs and CPU share; returns (result document or None, status,
    reason): status is "done" when the worker wrote its result, else "timeout" or "error". The
    document's ``clock`` gets when the worker was started and when it was gone. However it ends
    (Ctrl-C, or ``stop`` set by another thread), no process it started is left. ``on_phase`` is told
    each phase the worker enters (setup, verify, warmup, timed...), as it polls. With a ``zygote``
    (--fork-workers) the harness's worker is forked from it, else (or if it is gone) started anew."""
    files = _Files.write(spec, work_dir, tag)
    env, token = _worker_env(spec, share)
    started, spawned = time.monotonic(), time.time()
    proc = _start_worker(module, files, env, zygote)
    host.remember([proc.pid])
    try:
        if failure := _watch(proc, started, budget, files, stop, on_phase):
            return None, *failure
    finally:
        _end_tree(proc, token)
    if files.result.exists():
        doc = json.loads(files.result.read_text())
        clock = {**doc.get("clock", {}), "spawned": spawned, "ended": time.time(), "forked": isinstance(proc, Forked)}
        return {**doc, "clock": clock}, "done", ""
    return None, "error", _no_result(proc.returncode, files.log)


@dataclass(frozen=True)
class _Files:
    """A worker's files for one spec in ``work_dir``, named by its tag."""

    spec: Path
    result: Path
    log: Path
    timeout: Path
    phase: Path

    @classmethod
    def write(cls, spec: dict[str, Any], work_dir: Path, tag: str) -> _Files:
        """The files, with the spec written (naming the others) and none left from an earlier worker
        (a reused worker's, for a pair it handed back to a fresh one)."""
        work_dir.mkdir(parents=True, exist_ok=True)
        files = cls(*(work_dir / f"{tag}.{ext}" for ext in ("spec.json", "result.json", "log", "timeout", "phase")))
        for stale in (files.result, files.timeout, files.phase):
            stale.unlink(missing_ok=True)
        files.spec.write_text(json.dumps({**spec, "result_path": str(files.result), "timeout_path": str(files.timeout),
                                          "phase_path": str(files.phase), "log_path": str(files.log)}, indent=2))
        return files


def _worker_env(spec: dict[str, Any], share: Share) -> tuple[dict[str, str], str]:
    """A worker's environment (its GPUs and CPU share, a fresh token, this process as its parent) and
    the token; makes this process the subreaper of what the worker leaves behind."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", WORKER_TOKEN: (token := secrets.token_hex(8)),
           PARENT_PID_ENV: str(os.getpid()), **share.env()}
    if spec.get("options", {}).get("reproducible"):
        env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    become_subreaper()
    return env, token


def _no_result(code: int, log: Path) -> str:
    """Why a worker that exited (``code``) gave no result, with its log's tail."""
    tail = _log_tail(log)
    return f"worker {_how(code)} without a result" + (f"; log tail:\n{tail}" if tail else "")


def _watch(proc: subprocess.Popen, started: float, budget: Budget, files: _Files, stop: threading.Event | None,
           on_phase: Callable[[str], None] | None, until: Callable[[], bool] = lambda: False) -> tuple[str, str] | None:
    """Wait until the worker exits (or ``until()`` holds), telling ``on_phase`` each phase it enters;
    returns (status, reason) when its time ran out or the run was stopped, else None."""
    shown = ""
    while proc.poll() is None and not until():
        if on_phase is not None and files.phase.exists() and (now := files.phase.read_text()) != shown:
            on_phase(shown := now)
        declared = float(files.timeout.read_text()) if files.timeout.exists() else None
        if time.monotonic() - started > (limit := budget.limit(declared, started)):
            if budget.suite_ran_out():
                return "timeout", (f"stopped after {time.monotonic() - started:.0f} s: {SUITE_RAN_OUT}; "
                                   "killed with every process it started")
            return "timeout", f"timed out after {limit:.0f} s; killed with every process it started"
        if stop is not None and stop.is_set():
            return "error", INTERRUPTED
        time.sleep(0.05)
    return None


def _start_worker(module: str, files: _Files, env: dict[str, str], zygote: Zygote | None) -> subprocess.Popen | Forked:
    """The worker's process: forked from the zygote where there is one (the harness's own worker),
    else a new Python started with the worker module."""
    if zygote is not None and module == "aisp.harness.worker":
        with contextlib.suppress(OSError):
            return zygote.fork(files.spec, env, files.log, PACKAGE_PARENT)
    with open(files.log, "w") as log:
        return subprocess.Popen([sys.executable, "-m", module, str(files.spec)], cwd=PACKAGE_PARENT,
                                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)


@dataclass
class _Resident:
    proc: subprocess.Popen
    token: str
    spawned: float
    jobs: int = 0


class Pool:
    """``--reuse-workers``: one long-lived worker (``aisp.harness.worker --serve``) per CPU share (each
    GPU of a ``--gpus`` run; the one share of a default run), given pairs one after another instead of
    a fresh process per pair. A worker that timed out, died, was stopped, left processes behind or
    could not put its state back (:mod:`aisp.harness.isolation`) is ended; the next pair starts a new one."""

    def __init__(self, module: str = "aisp.harness.worker") -> None:
        self._idle: dict[Share, _Resident] = {}
        self._lock = threading.Lock()
        self.module = module
        """Run as ``python -m module --serve`` (the tests' stand-ins follow the same protocol)."""

    def run(self, spec: dict[str, Any], work_dir: Path, budget: Budget, tag: str, share: Share,
            stop: threading.Event | None = None, on_phase: Callable[[str], None] | None = None
            ) -> tuple[dict | None, str, str]:
        """Like :func:`spawn`, in this share's worker; the document's ``reused`` says which worker and
        how many pairs it ran before. Status "fresh" (a pair that needs ranks) is the caller's to spawn."""
        files = _Files.write(spec, work_dir, tag)
        with self._lock:
            worker = self._idle.pop(share, None)
        if worker is None or worker.proc.poll() is not None:
            worker = self._start(spec, share, files.log)
        sent, started = worker.spawned if worker.jobs == 0 else time.time(), time.monotonic()
        keep = False
        try:
            with contextlib.suppress(BrokenPipeError, OSError):
                worker.proc.stdin.write(f"{files.spec}\n")
                worker.proc.stdin.flush()
            if failure := _watch(worker.proc, started, budget, files, stop, on_phase, until=files.result.exists):
                return None, *failure
            if not files.result.exists():
                return None, "error", _no_result(worker.proc.wait(), files.log)
            doc = json.loads(files.result.read_text())
            left = _children(worker.proc.pid)
            keep = not doc.get("retired") and not left
            notes = [doc["retired"]] if doc.get("retired") else []
            notes += [f"the worker was retired after this pair: it left {len(left)} process(es) running"] * bool(left)
            reused = {"pid": worker.proc.pid, "earlier_pairs": worker.jobs, "notes": notes}
            return {**doc, "reused": reused, "clock": {**doc.get("clock", {}), "spawned": sent, "ended": time.time()}}, \
                "done", ""
        finally:
            worker.jobs += 1
            if keep:
                with self._lock:
                    self._idle[share] = worker
            else:
                _end_tree(worker.proc, worker.token)

    def _start(self, spec: dict[str, Any], share: Share, log_path: Path) -> _Resident:
        env, token = _worker_env(spec, share)
        spawned = time.time()
        with open(log_path, "w") as log:
            proc = subprocess.Popen([sys.executable, "-m", self.module, "--serve"], cwd=PACKAGE_PARENT,
                                    stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=env, text=True,
                                    start_new_session=True)
        host.remember([proc.pid])
        return _Resident(proc, token, spawned)

    def close(self) -> None:
        """End every idle worker (EOF on its stdin, then its process tree)."""
        with self._lock:
            workers, self._idle = list(self._idle.values()), {}
        for worker in workers:
            with contextlib.suppress(OSError):
                worker.proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.proc.wait(timeout=KILL_GRACE_S)
            _end_tree(worker.proc, worker.token)


def _children(pid: int) -> list[psutil.Process]:
    """A process's living descendants; none once it has exited (a retired worker leaves at once)."""
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _how(code: int) -> str:
    how = f"killed by {_signal_name(code)}" if code < 0 else f"exited with code {code}"
    return how + " (out of memory?)" * (code == -signal.SIGKILL)


def become_subreaper() -> None:
    """On Linux, adopt orphaned descendants (a pair's daemon whose worker exited) so they can be ended."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def descendants(token: str | None = None) -> list[psutil.Process]:
    """This process's living descendants; with a token, only those whose environment carries it."""
    def carries(proc: psutil.Process) -> bool:
        with contextlib.suppress(psutil.Error):
            return proc.environ().get(WORKER_TOKEN) == token
        return False
    return [p for p in psutil.Process().children(recursive=True) if token is None or carries(p)]


def carriers(token: str) -> list[psutil.Process]:
    """Every process whose environment carries the token, wherever it sits: a child the worker started
    in a session of its own while it was being stopped is orphaned when the worker dies, and init
    (not this process) may adopt it."""
    found = []
    for each in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if each.pid != os.getpid() and each.environ().get(WORKER_TOKEN) == token:
                found.append(each)
    return found


def _end_tree(proc: subprocess.Popen, token: str) -> None:
    """SIGTERM, then SIGKILL after a grace period, the worker's process group and every process carrying
    its token (in sessions of their own too, or adopted here as orphans); then SIGKILL to any carrier
    that appeared meanwhile (the worker was starting it when it was stopped) or was adopted by init.
    That last sweep reads every process's environment, so it runs only for a worker stopped here (a
    timeout, a stop), not after each worker that exited by itself."""
    stopped = proc.poll() is None
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
        procs = descendants(token)
        host.remember(p.pid for p in procs)
        for each in procs:
            with contextlib.suppress(psutil.Error):
                each.send_signal(sig)
        if not psutil.wait_procs(procs, timeout=KILL_GRACE_S)[1]:
            break
    proc.poll()
    if not stopped:
        return
    late = carriers(token)
    host.remember(p.pid for p in late)
    for each in late:
        with contextlib.suppress(psutil.Error):
            each.kill()
    psutil.wait_procs(late, timeout=KILL_GRACE_S)


def pair_info(pair: Pair) -> dict[str, Any]:
    return {"target": pair.target, "group": pair.group, "name": pair.name,
            "files": [str(p) for p in (pair.baseline, *pair.optimized)]}


Launch = Callable[[dict[str, Any], str], tuple[dict | None, str, str]]
"""Starts one worker of a pair on its spec and tag (``spawn`` with the pair's folder, budget and share)."""


def run_pair(pair: Pair, options: RunOptions, run_dir: Path, budget: Budget, on_timed: str | None = None,
             share: Share = NO_SHARE, stop: threading.Event | None = None,
             on_phase: Callable[[str], None] | None = None, pool: Pool | None = None,
             zygote: Zygote | None = None) -> dict[str, Any]:
    """Run one pair in a subprocess (several for --cold-start) with its GPUs and CPU share, and
    assemble its result, with its phases and placement; ``on_phase`` is told each step its workers
    enter. With a ``pool`` (--reuse-workers), the pair's main worker is the share's reused one."""
    info = pair_info(pair)
    if pair.problem:
        return failed(info, "error", pair.problem)
    work, docs = run_dir / pair.slug, []

    def launch(spec: dict[str, Any], tag: str) -> tuple[dict | None, str, str]:
        reused = pool is not None and tag == "pair"  # the main worker; cold-start runs are fresh ones
        doc, status, reason = pool.run(spec, work / "logs", budget, tag, share, stop, on_phase) if reused else (None, "", "")
        if not reused or (doc or {}).get("status") == "fresh":  # a pair that needs ranks is handed back
            doc, status, reason = spawn(spec, work / "logs", budget, tag, share, stop, on_phase=on_phase, zygote=zygote)
        docs.append(doc or {})
        return doc, status, reason
    spec = {"paths": info["files"], "options": options.to_dict(), "profile_dir": str(work / "profiles"),
            "on_timed": on_timed, "plan": asdict(CheckPlan.draw(options.seed, options.iterations))}
    result = _pair_result(info, spec, options, work, launch)
    placement = {**share.to_dict(), "applied": docs[0].get("cpu_share") if docs else None,
                 "host_load_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
                 "forked": bool(docs and (docs[0].get("clock") or {}).get("forked"))}
    if reused := next((d["reused"] for d in docs if d.get("reused")), None):
        placement["reused_worker"] = {k: reused[k] for k in ("pid", "earlier_pairs")}
        result = {**result, "notes": [*result.get("notes", []), *reused["notes"]]}
    return {**result, "phases": pair_phases(docs), "placement": placement}


def _pair_result(info: dict[str, Any], spec: dict[str, Any], options: RunOptions, work: Path,
                 launch: Launch) -> dict[str, Any]:
    doc, status, reason = launch(spec, "pair")
    if doc is None:
        return failed(info, status, reason)
    if doc["status"] != "done":
        return failed(info, doc["status"], doc.get("reason") or "", doc.get("workload"))
    raw = doc["variants"]
    if options.cold_start and not options.verify_only:
        raw = _cold_samples(spec, raw, work, launch, options.cold_runs)
    return _annotate(assemble(info, doc["workload"], raw), doc)


def _annotate(result: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    """Add telemetry, throttle and evidence notes to an assembled result."""
    notes = []
    telemetry = doc.get("telemetry") or {}
    for var in [result["baseline"], *result["variants"]]:
        notes += [f"{var['name']}: {note}" for note in (var.get("verification") or {}).get("notes", [])]
        count = len(var.get("throttled_samples") or {})
        if count:
            reasons = sorted({r for rs in var["throttled_samples"].values() for r in rs})
            notes.append(f"{var['name']}: {count} of {len(var.get('samples_ms') or [])} samples taken while "
                         f"throttled ({', '.join(reasons)})")
        if starved := var.get("starved_samples"):
            retaken = var.get("retaken_samples") or 0
            notes.append(f"{var['name']}: {starved} of {len(var.get('samples_ms') or []) + retaken} samples: the host "
                         f"issued the call past the spacer's end (the GPU may have idled in the window); the spacer grew "
                         f"to {var.get('spacer_ms') or 0:.3g} ms; {retaken} of them taken again (they timed the host)")
        if bound := var.get("host_bound"):
            notes.append(f"{var['name']}: host-bound: CUDA events {bound['events_ms']:.4g} ms against a host issue time "
                         f"of {bound['issue_ms']:.4g} ms; its time is device work, a caller issuing it waits about "
                         "the issue time")
    if telemetry.get("unavailable"):
        notes.append(telemetry["unavailable"])
    return {**result, "telemetry": telemetry, "notes": notes}


def _cold_samples(spec: dict[str, Any], raw: list[dict[str, Any]], work: Path, launch: Launch,
                  runs: int) -> list[dict]:
    """Re-time each verified variant alone in ``runs`` fresh processes, the baseline's first; each
    process checks one timed call (the baseline's save its output, the others compare with it).
    Keeps the verification records, and each process's samples as one group (the interval
    includes their spread)."""
    merged, reference = [], work / "cold_reference.pt"
    for i, record in enumerate(raw):
        groups: list[dict[str, Any]] = []
        while record["verdict"] in ("pending", "ok") and len(groups) < runs:
            single = {**spec, "paths": [record["file"]], "single": True, "cold_reference": str(reference),
                      "cold_baseline": i == 0}
            doc, status, reason = launch(single, f"cold{i}_{len(groups)}")
            if doc is None or doc.get("status") != "done":
                record = {**record, "verdict": status if doc is None else doc["status"],
                          "reason": reason or (doc or {}).get("reason"), "samples_ms": []}
            elif doc["variants"][0]["verdict"] not in ("pending", "ok"):
                timed = doc["variants"][0]
                record = {**record, "verdict": timed["verdict"], "reason": timed["reason"], "samples_ms": []}
            else:
                groups.append(doc["variants"][0])
        if len(groups) == runs:
            checks = record["verification"]["checks"] + groups[-1]["verification"]["checks"]
            record = {**record, "memory": groups[-1]["memory"], "metrics": groups[-1]["metrics"],
                      "sample_groups": [g["samples_ms"] for g in groups],
                      "verification": {**record["verification"], "checks": checks},
                      **{key: [x for g in groups for x in g.get(key, [])] for key in SAMPLE_KEYS}}
        merged.append(record)
    reference.unlink(missing_ok=True)
    return merged


def run_suite(pairs: list[Pair], options: RunOptions, reporter: Reporter | None = None,
              hooks: Hooks = Hooks(), part: Part | None = None) -> tuple[list[dict[str, Any]], Path]:
    """Run every pair (on the GPUs of ``hooks.topology``, several at once), write artifacts, and
    return the results (in the order of ``pairs``) and the run folder. Each of ``hooks.post`` may
    amend each result (expectations add ``regressed``). With ``part.resume``, continue that run folder:
    only the pairs without a final result there run (:mod:`aisp.harness.resume`; raises ResumeError
    before any pair runs where it cannot), and the summary holds every pair's."""
    reporter, part = reporter or Reporter(), part or Part()
    run_dir = part.resume or new_run_dir(options.artifacts_dir)
    with holding(run_dir):
        here = {**environment.manifest(PACKAGE_PARENT, options.to_dict()),
                "schedule": environment.schedule(hooks.topology, cpu_shares(hooks.topology), options.shard)}
        log, earlier = PartLog.begin(run_dir, here, pairs, part)
        finished = _run_part([p for p in pairs if p.slug not in earlier], options, reporter, hooks,
                             _Run(run_dir, here, log, len(earlier), len(pairs)))
        results = [earlier.get(p.slug) or finished[p.slug] for p in pairs]
        log.write(complete=True)
        write_summary(run_dir, results, {"run_id": run_dir.name, "hardware_key": here["hardware_key"],
                                         "options": options.to_dict(), "host_load_at_end": environment.host_load(),
                                         "parts": log.parts})
        if hooks.finish is not None:
            hooks.finish(run_dir, results)
    reporter.finish(results, run_dir)
    return results, run_dir


@dataclass(frozen=True)
class _Run:
    """Where a part of a run writes: its folder, this machine's manifest, the part's record, and how
    many of how many selected pairs had finished before it (shown in the progress)."""

    run_dir: Path
    manifest: dict[str, Any]
    log: PartLog
    earlier: int
    total: int


def _run_part(pairs: list[Pair], options: RunOptions, reporter: Reporter, hooks: Hooks, run: _Run) -> dict[str, Any]:
    """Run these pairs into the run folder; returns their results by slug."""
    run_dir, manifest = run.run_dir, run.manifest
    deadline = time.monotonic() + options.suite_timeout if options.suite_timeout else None
    by_slug, finished = {p.slug: p for p in pairs}, {}
    pool = Pool() if options.reuse_workers else None
    zygote = _zygote(run_dir) if options.fork_workers and not options.reuse_workers and pairs else None

    def work(slug: str, share: Share, stop: threading.Event) -> Outcome:
        if deadline is not None and deadline <= time.monotonic():
            return Outcome(failed(pair_info(by_slug[slug]), "timeout", NOT_STARTED))
        gpus = hooks.hints.get(slug, Hint()).gpus
        share = share if share.threads is not None else default_share(hooks.topology, gpus)

        def again(i: int | None = None) -> dict[str, Any]:
            folder = run_dir if i is None else run_dir / slug / f"rerun{i}"
            return _with_host(lambda: run_pair(by_slug[slug], options, folder, Budget(options.timeout_multiplier, deadline),
                                               hooks.on_timed, share, stop,
                                               lambda step: reporter.pair_step(by_slug[slug], step),
                                               pool if i is None and gpus == 1 else None, zygote), hooks, share, gpus)
        result = again()
        if hooks.confirm is not None and not stop.is_set():
            result = hooks.confirm(result, PairContext(manifest, run_dir / slug), again)
        return Outcome(result, _needs(result, share))

    def done(slug: str, result: dict[str, Any]) -> None:
        for step in hooks.post:
            result = step(result, PairContext(manifest, run_dir / slug))
        write_pair(run_dir, result)
        finished[slug] = result
        run.log.write()
        reporter.pair_done(result)
    reporter.start(pairs, run.earlier, run.total)
    try:
        run_jobs(list(by_slug), hooks.hints, hooks.topology, work,
                 Events(lambda slug, share: reporter.pair_started(by_slug[slug], _where(share)), done))
    finally:
        if pool is not None:
            pool.close()
        if zygote is not None:
            zygote.close()
    return finished


def _zygote(run_dir: Path) -> Zygote | None:
    """The run's zygote (--fork-workers), or None (workers start anew) when it cannot start: the reason
    is in the run folder's ``zygote.log``."""
    try:
        return Zygote({**os.environ, "PYTHONUNBUFFERED": "1"}, PACKAGE_PARENT, run_dir / "zygote.log")
    except OSError:
        return None


def default_share(topo: Topology, gpus: int, physical: int | None = None) -> Share:
    """The CPU share of a worker the schedule gave none (one pair at a time): the host's physical
    cores (torch's own default; hyperthreads slow its thread pool), at most the cores this process
    may use, split among the pair's ranks (``gpus``, from its expectation files), as threads per
    rank; no binding. Set explicitly so that it is recorded and every rank's pool is bounded."""
    cores = min(topo.cpu_count, physical or psutil.cpu_count(logical=False) or topo.cpu_count)
    return Share(threads=max(1, cores // max(1, gpus)))


def _with_host(measure: Callable[[], dict[str, Any]], hooks: Hooks, share: Share, gpus: int) -> dict[str, Any]:
    """The pair's result with the host's state around it (:mod:`aisp.harness.host`): load, steal and
    other processes on its GPUs, read before it starts and after its processes are gone; the run-queue
    wait and op dispatch cost its worker read after the timed samples."""
    def pids() -> Iterable[int] | None:
        return hooks.gpu_pids(share, gpus) if hooks.gpu_pids is not None else None
    before = host.read(pids())
    result = measure()
    after = host.read(pids())
    own = host.own_processes([os.getpid(), *(p.pid for p in descendants())])
    telemetry = result.get("telemetry") or {}
    state = host.state(before, after, os.cpu_count() or 1, own, telemetry.get("cpu_wait"))
    busy = [f"host busy: {why}" for why in state["busy"]]
    return {**result, "host": {**state, "dispatch_us": telemetry.get("dispatch_us"),
                               "dispatch_cpu": telemetry.get("dispatch_cpu")},
            "notes": [*result.get("notes", []), *busy]}


def _where(share: Share) -> str:
    return "" if not share.gpus else f"GPU{'s' * (len(share.gpus) > 1)} {','.join(share.gpus)}"


def _needs(result: dict[str, Any], share: Share) -> int | None:
    """The GPUs a pair turned out to need when it was skipped for having too few (its hint was wrong)."""
    requires = (result.get("workload") or {}).get("requires") or {}
    needs = max(requires.get("gpus", 1), requires.get("ranks", 1))
    return needs if share.gpus and result["verdict"] == "skipped" and needs > len(share.gpus) else None
