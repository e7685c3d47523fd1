"""A test module's Triton-interpreter scripts run in one Python process, each in a fork of it.

A script run as ``python -c`` first pays ~4 CPU seconds to import torch and triton, often more than
its kernels take under the interpreter. :func:`run_scripts` pays that once for all of a module's
scripts: a driver process imports torch and triton with TRITON_INTERPRET=1 already set (as each
script's own process had it, before triton's import), then forks one child a script, so that no
script sees another's imports, patches, seeds or sys.path, each runs as ``python -c`` runs it
(``__main__``, source file ``<string>``, the working directory first on sys.path) and a crash or a
timeout stays the one script's. Each script's outcome comes back as ``subprocess.run`` gave it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

DRIVER = r"""
import json, os, signal, sys, traceback
import torch, triton  # what every script imports first, imported once before the forks
folder = sys.argv[1]
with open(os.path.join(folder, "jobs.json")) as f:
    jobs = json.load(f)
codes = {}
for i, job in enumerate(jobs):
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        for fd, kind in ((1, "out"), (2, "err")):
            os.dup2(os.open(os.path.join(folder, f"{i}.{kind}"), os.O_WRONLY | os.O_CREAT), fd)
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
"""


def run_scripts(scripts: dict[str, str], path: tuple[str, ...] = (), timeout: int = 900,
                ) -> dict[str, subprocess.CompletedProcess]:
    """Run each of ``scripts`` (name: Python source) under TRITON_INTERPRET=1 from the repository root,
    with the repository and then ``path`` on sys.path (as PYTHONPATH put them), each in its own fork of
    one driver process and killed after ``timeout`` seconds; name: its return code, stdout and stderr."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory(prefix="ci_triton_") as folder:
        jobs = [{"source": source, "path": [str(p) for p in path], "timeout": timeout} for source in scripts.values()]
        Path(folder, "jobs.json").write_text(json.dumps(jobs))
        driver = subprocess.run([sys.executable, "-c", DRIVER, folder], capture_output=True, text=True, env=env,
                                cwd=ROOT, timeout=timeout * len(scripts) + 120, check=False)
        assert driver.returncode == 0, driver.stdout[-2000:] + driver.stderr[-3000:]
        codes = json.loads(Path(folder, "codes.json").read_text())
        return {name: subprocess.CompletedProcess(name, codes[str(i)], *(
            Path(folder, f"{i}.{kind}").read_text(errors="replace") for kind in ("out", "err")))
            for i, name in enumerate(scripts)}


def assert_ran(done: dict[str, subprocess.CompletedProcess], name: str, marker: str | None = None) -> None:
    """Script ``name`` of ``done`` (:func:`run_scripts`'s answer) exited 0, having printed ``marker`` if given;
    else fail with the tails of its output."""
    proc = done[name]
    assert proc.returncode == 0 and (marker is None or marker in proc.stdout), proc.stdout[-2000:] + proc.stderr[-3000:]
