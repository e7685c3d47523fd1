"""Run and verify jobs: each one an ``aisp bench run|verify`` subprocess in its own process group
(a whole chapter takes minutes), polled by the client, killed with its group at its time limit or
when the server stops. Each job writes its artifacts under its own folder."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from aisp.harness.discovery import repo_root, resolve_targets
from aisp.harness.runner import DEFAULT_TIMEOUT_S, KILL_GRACE_S
from aisp.mcp.models import JobResult, JobStatus, PairOutcome, Speedup

LOG_TAIL_LINES = 20
SLACK_S = 60.0
"""A job's limit is the harness's per-pair timeout times its pairs, plus this for start-up."""


@dataclass
class Job:
    job_id: str
    action: str
    target: str
    proc: subprocess.Popen
    folder: Path
    started: float
    limit_s: float
    timed_out: bool = field(default=False)


class Jobs:
    """The server's jobs, by id."""

    def __init__(self, root: Path) -> None:
        self.root, self.jobs = root, {}

    def start(self, action: str, target: str, device: str) -> JobStatus:
        """Start ``aisp bench ACTION -t TARGET``; an unknown target raises TargetError at once."""
        pairs = resolve_targets([target], repo_root())
        job_id = secrets.token_hex(4)
        folder = self.root / job_id
        folder.mkdir(parents=True)
        limit = DEFAULT_TIMEOUT_S * len(pairs) + SLACK_S
        cmd = [sys.executable, "-m", "aisp", "bench", action, "-t", target, "--device", device,
               "--artifacts-dir", str(folder / "artifacts")]
        with open(folder / "log", "w") as log:
            proc = subprocess.Popen(cmd, cwd=repo_root(), stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        job = Job(job_id, action, target, proc, folder, time.monotonic(), limit)
        self.jobs[job_id] = job
        timer = threading.Timer(limit, self._expire, [job])
        timer.daemon = True
        timer.start()
        return self.status(job_id)

    def _job(self, job_id: str) -> Job:
        if job_id not in self.jobs:
            raise KeyError(f"no job '{job_id}' (this server's jobs: {', '.join(self.jobs) or 'none'})")
        return self.jobs[job_id]

    def status(self, job_id: str) -> JobStatus:
        job = self._job(job_id)
        code = job.proc.poll()
        state = "running" if code is None else "timeout" if job.timed_out else "done" if code == 0 else "failed"
        log = (job.folder / "log").read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
        return JobStatus(job_id=job.job_id, action=job.action, target=job.target, state=state,
                         exit_code=None if job.timed_out else code, elapsed_s=round(time.monotonic() - job.started, 1),
                         log_tail="\n".join(log))

    def result(self, job_id: str) -> JobResult:
        """The job's status and, once it ended, each pair's verdict from its run's summary.json."""
        status = self.status(job_id)
        summaries = sorted((self._job(job_id).folder / "artifacts").glob("*/summary.json"))
        if status.state == "running" or not summaries:
            return JobResult(status=status)
        doc = json.loads(summaries[-1].read_text())
        pairs = [PairOutcome(target=r["target"], verdict=r["verdict"], reason=r.get("reason") or "",
                             speedup=Speedup(**r["speedup"]) if r.get("speedup") else None, best=r.get("best"))
                 for r in doc["results"]]
        return JobResult(status=status, run_dir=str(summaries[-1].parent), pairs=pairs)

    def _expire(self, job: Job) -> None:
        if job.proc.poll() is None:
            job.timed_out = True
            end_group(job.proc)

    def close(self) -> None:
        """End every running job with its process group."""
        for job in self.jobs.values():
            end_group(job.proc)


def end_group(proc: subprocess.Popen) -> None:
    """SIGTERM the process group (aisp stops its workers on it), SIGKILL after the grace period."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if proc.poll() is not None:
            break
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(KILL_GRACE_S)
