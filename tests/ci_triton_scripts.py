"""The tests' Triton-interpreter scripts run in forks of one Python process a pytest process.

A script run as ``python -c`` first pays ~4 CPU seconds (1.3 s on an idle core) to import torch and
triton, often more than its kernels take under the interpreter; some 25 test modules each ran one such
process. :func:`run_scripts` pays that once for the whole session: a driver process, started at the
first call and kept until pytest exits (EOF on its stdin ends it), imports torch and triton with
TRITON_INTERPRET=1 already set (as each script's own process had it, before triton's import), then
forks one child a script, so that no script sees another's imports, patches, seeds or sys.path, each
runs as ``python -c`` runs it (``__main__``, source file ``<string>``, the working directory first on
sys.path, the caller's environment at the call) and a crash or a timeout stays the one script's. The
driver itself runs no script code and no torch op, so each fork starts from the same state. Each
script's outcome comes back as ``subprocess.run`` gave it."""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

DRIVER = r"""
import json, os, signal, sys, traceback
import torch, triton  # what every script imports first, imported once before the forks
while folder := sys.stdin.readline().strip():
    with open(os.path.join(folder, "jobs.json")) as f:
        jobs = json.load(f)
    codes = {}
    for i, job in enumerate(jobs):
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            for fd, kind in ((1, "out"), (2, "err")):
                os.dup2(os.open(os.path.join(folder, f"{i}.{kind}"), os.O_WRONLY | os.O_CREAT), fd)
            os.environ.clear()
            os.environ.update(job["env"])
            sys.path[1:1] = job["path"]
            signal.alarm(job["timeout"])  # SIGALRM ends this child alone, as subprocess.run's timeout did
            code = 0
            try:
                exec(compile(job["source"], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
            except SystemExit as exc:  # as the interpreter exits: an int is the status, anything else printed, 1
                code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
                if not isinstance(exc.code, int) and exc.code is not None:
                    print(exc.code, file=sys.stderr)
            except BaseException:
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        codes[i] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    with open(os.path.join(folder, "codes.json"), "w") as f:
        json.dump(codes, f)
    sys.stdout.write(folder + "\n")
    sys.stdout.flush()
"""

_START_ENV = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
"""The driver's environment: this process's at import (conftest has set OMP_NUM_THREADS by then), not
whatever a test had patched when it happened to start the driver."""
_lock = threading.Lock()
_driver: dict[str, object] = {}


def _started() -> tuple[subprocess.Popen, Path]:
    """The running driver and the file its own stderr goes to (started anew if there is none)."""
    proc = _driver.get("proc")
    if isinstance(proc, subprocess.Popen) and proc.poll() is None:
        return proc, _driver["log"]  # type: ignore[return-value]
    log = Path(tempfile.mkstemp(prefix="ci_triton_driver_", suffix=".log")[1])
    with log.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", DRIVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=err, env=_START_ENV, cwd=ROOT, start_new_session=True)
    _driver.update(proc=proc, log=log)
    return proc, log


def _stop() -> None:
    proc = _driver.pop("proc", None)
    if isinstance(proc, subprocess.Popen):
        proc.stdin.close()  # EOF: the driver's loop ends
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    log = _driver.pop("log", None)
    if isinstance(log, Path):
        log.unlink(missing_ok=True)


atexit.register(_stop)


def _ask(folder: str, limit: float) -> None:
    """Have the driver run the jobs in ``folder``; fail with its stderr's tail if it dies or runs past ``limit`` s
    (then it is killed with its children, and the next call starts another)."""
    proc, log = _started()
    proc.stdin.write(folder.encode() + b"\n")
    proc.stdin.flush()
    deadline = time.monotonic() + limit
    while not select.select([proc.stdout], [], [], max(0.0, min(5.0, deadline - time.monotonic())))[0]:
        if proc.poll() is not None or time.monotonic() >= deadline:
            late = proc.poll() is None
            if late:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            _driver.pop("proc", None)
            raise AssertionError(f"the interpreter driver {f'ran past {limit:g} s' if late else 'died'}: "
                                 f"{log.read_text(errors='replace')[-3000:]}")
    answer = proc.stdout.readline().decode().strip()
    assert answer == folder, (answer, log.read_text(errors="replace")[-3000:])


def run_scripts(scripts: dict[str, str], path: tuple[str, ...] = (), timeout: int = 900,
                ) -> dict[str, subprocess.CompletedProcess]:
    """Run each of ``scripts`` (name: Python source) under TRITON_INTERPRET=1 from the repository root,
    with the repository and then ``path`` on sys.path (as PYTHONPATH put them) and this process's
    environment, each in its own fork of the session's driver process and killed after ``timeout``
    seconds; name: its return code, stdout and stderr."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory(prefix="ci_triton_") as folder, _lock:
        jobs = [{"source": source, "path": [str(p) for p in path], "timeout": timeout, "env": env}
                for source in scripts.values()]
        Path(folder, "jobs.json").write_text(json.dumps(jobs))
        _ask(folder, timeout * len(scripts) + 120)
        codes = json.loads(Path(folder, "codes.json").read_text())
        return {name: subprocess.CompletedProcess(name, codes[str(i)], *(
            Path(folder, f"{i}.{kind}").read_text(errors="replace") for kind in ("out", "err")))
            for i, name in enumerate(scripts)}


def assert_ran(done: dict[str, subprocess.CompletedProcess], name: str, marker: str | None = None) -> None:
    """Script ``name`` of ``done`` (:func:`run_scripts`'s answer) exited 0, having printed ``marker`` if given;
    else fail with the tails of its output."""
    proc = done[name]
    assert proc.returncode == 0 and (marker is None or marker in proc.stdout), proc.stdout[-2000:] + proc.stderr[-3000:]
