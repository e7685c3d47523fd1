"""Fresh worker processes without paying Python's and torch's start each time (``--fork-workers``).

A pair's worker spends seconds before its first line: Python, torch and the harness imported (on a
4 x H200 host, 4.8 s a pair, 30% of a whole-book run's worker time, 2026-11-28). The zygote is one
process that imports them once, touches no GPU, and forks a child per pair on request. Each child is
a new process that runs :func:`aisp.harness.worker.main` exactly as a spawned worker would: its own
session, environment (GPUs, CPU share, token), working folder and log; CUDA is first initialized
in the child, as in a spawned worker. Unlike ``--reuse-workers`` nothing of one pair reaches the next:
every child starts from the zygote's untouched state.

Protocol on the zygote's stdin/stdout, one JSON document per line: the runner sends ``{"id", "spec",
"env", "log", "cwd"}``; the zygote answers ``{"id", "pid"}`` once forked and ``{"exit": pid, "code"}``
when a child ends (code as ``subprocess``: negative for a signal). EOF on stdin ends the zygote.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

from aisp.harness.forking import draw_own_seeds, fork_poisoned

_SEND = threading.Lock()
"""Held while writing an answer, and by the main thread while it forks (a child never inherits it held)."""


COMPILER_MODULES = ("torch._dynamo", "triton", "triton.language")
"""Imported by the zygote beside torch and the harness: pairs that compile (``torch.compile``, Triton
kernels) spent 4-7 s importing the compile stack in every worker of a 4 x H200 book (2026-11-28).
Only modules after whose import a forked child can still start CUDA (checked on an H200): importing
``torch._inductor.compile_fx`` queries the driver, and every child then failed with "Cannot
re-initialize CUDA in forked subprocess". What Inductor's config decides from the process's cores
at import (its compile threads; ``torch._dynamo`` imports it) is decided again in each child, on its
own CPU share (``scheduler.apply_share_from_env``)."""


def _send(doc: dict[str, Any]) -> None:
    with _SEND:
        sys.stdout.write(json.dumps(doc) + "\n")
        sys.stdout.flush()


def _reap() -> None:
    """The reaper thread: report every child that ends."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:  # no child now
            time.sleep(0.05)
            continue
        _send({"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def _child(request: dict[str, Any]) -> None:
    """In the forked child: become the worker the runner asked for; never returns."""
    code = 70
    try:
        os.setsid()
        fd = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        # new stdio objects: the zygote's may have been mid-write in its reaper thread when it forked
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own stdin, for its lifetime
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        os.environ.clear()
        os.environ.update(request["env"])
        from aisp.harness import distributed, worker

        os.environ[distributed.PARENT_PID_ENV] = str(os.getppid())  # dies with the zygote, which dies with the runner
        os.chdir(request["cwd"])
        draw_own_seeds()  # a spawned worker draws its own seeds; the zygote's would be every child's
        code = worker.main([request["spec"]])
    except BaseException:  # noqa: BLE001 - whatever happens, the child must not return into the zygote's loop
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve() -> int:
    """The zygote: import what a worker needs, then fork one child per request until EOF."""
    from aisp.harness import worker  # noqa: F401 - imported once here (torch with it), for every child

    imported = []
    for name in COMPILER_MODULES:  # the compile stack too: 4-7 s of a torch.compile or Triton pair's import
        try:
            importlib.import_module(name)
        except ImportError:  # no Triton here (a CPU build); the pairs that need it import it themselves
            continue
        imported.append(name)
    if fork_poisoned():
        print("the zygote's imports initialized CUDA, queried its driver or started CPU threads: a forked child "
              "could not use them", file=sys.stderr)
        return 1
    warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)  # see _SEND
    gc.freeze()  # the imports' objects: a child's gc.collect() (several a pair) no longer walks them
    threading.Thread(target=_reap, daemon=True).start()
    _send({"ready": os.getpid(), "imported": imported})
    for line in sys.stdin:
        request = json.loads(line)
        with _SEND:
            pid = os.fork()
            if pid == 0:
                _child(request)
        _send({"id": request["id"], "pid": pid})
    return 0


READY_S = 120.0
"""How long the zygote may take to import torch and the harness before workers are started anew."""


class Forked:
    """A child of the zygote, as the runner watches a ``subprocess.Popen``: ``pid``, ``poll()``,
    ``returncode``."""

    def __init__(self, zygote: Zygote, pid: int) -> None:
        self.zygote, self.pid, self.returncode = zygote, pid, None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.zygote.exit_code(self.pid)
        return self.returncode


class Zygote:
    """The runner's side: starts the zygote and asks it for workers. Raises OSError when it cannot
    start (the caller spawns workers as usual then)."""

    def __init__(self, env: dict[str, str], cwd: Path, log: Path) -> None:
        with open(log, "w") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "aisp.harness.zygote"], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=err, cwd=cwd, env=env, text=True,
                                         start_new_session=True)
        started = select.select([self.proc.stdout], [], [], READY_S)[0]  # its imports take seconds, not minutes
        ready = json.loads(self.proc.stdout.readline() or "{}") if started else {}
        if "ready" not in ready:
            self.proc.kill()
            self.proc.wait()
            raise OSError(f"the zygote did not start within {READY_S:.0f} s (exit {self.proc.poll()})")
        self.imported: list[str] = ready.get("imported", [])
        """The compile modules the zygote imported for its children (``COMPILER_MODULES`` found here)."""
        self._lock, self._next = threading.Lock(), 0
        self._exits: dict[int, int] = {}
        self._forked: dict[int, int] = {}
        self._answer = threading.Condition(self._lock)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            doc = json.loads(line)
            with self._answer:
                if "exit" in doc:
                    self._exits[doc["exit"]] = doc["code"]
                else:
                    self._forked[doc["id"]] = doc["pid"]
                self._answer.notify_all()
        with self._answer:  # the zygote is gone: its children are too (they die with it)
            self._answer.notify_all()

    def fork(self, spec: Path, env: dict[str, str], log: Path, cwd: Path) -> Forked:
        """A new worker for ``spec``; raises OSError when the zygote is gone."""
        with self._answer:
            self._next += 1
            ident = self._next
            try:
                self.proc.stdin.write(json.dumps({"id": ident, "spec": str(spec), "env": env, "log": str(log),
                                                  "cwd": str(cwd)}) + "\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError) as exc:
                raise OSError(f"the zygote is gone: {exc}") from exc
            while ident not in self._forked:
                if self.proc.poll() is not None:
                    raise OSError("the zygote is gone")
                self._answer.wait(0.5)
            return Forked(self, self._forked.pop(ident))

    def exit_code(self, pid: int) -> int | None:
        with self._lock:
            if pid in self._exits:
                return self._exits[pid]
        return -signal.SIGKILL if self.proc.poll() is not None else None  # killed with the zygote

    def close(self) -> None:
        """EOF to the zygote, which then ends."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


if __name__ == "__main__":
    sys.exit(serve())
