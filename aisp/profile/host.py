"""Host (CPU) sampling with py-spy: where a variant's ``run()`` or a command spends the host's time.

For pairs whose time is host work (JPEG decode in DataLoader workers, staging copies, page faults),
which neither torch.profiler's device view nor Nsight Compute explains. py-spy samples Python
stacks from outside the process, child processes included (``--subprocesses``: a DataLoader's
workers), without changing the program. A pair is sampled only while its profiled ``run()`` calls
execute: py-spy attaches to this process for that window (:func:`recording`). A command is sampled
from its start to its end (:func:`record_command`). Both write py-spy's folded stacks
(``<name>.pyspy.txt``, one ``frame;frame;... count`` line per distinct stack) and summarize them.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aisp.profile.nsight import failure, run_logged

RATE = 200
"""Samples a second."""
ATTACH_S = 1.0
"""Seconds py-spy gets to attach before the profiled calls start."""
TOP = 8
"""Frames and processes listed in a summary."""
MISSING = "py-spy not found on PATH (pip install py-spy)"
_LINE = re.compile(r":\d+\)$")


def _spy() -> str | None:
    return shutil.which("py-spy")


def _args(spy: str, out: Path) -> list[str]:
    return [spy, "record", "--subprocesses", "--format", "raw", "--rate", str(RATE), "-o", str(out)]


def record_command(command: list[str], base: Path, timeout_s: float) -> dict[str, Any]:
    """``command`` run under py-spy from start to end; the summary, or ``{"skipped"}``/the failure."""
    spy = _spy()
    if spy is None:
        return {"skipped": MISSING}
    out, log = base.with_suffix(".pyspy.txt"), base.with_suffix(".pyspy.log")
    rc = run_logged([*_args(spy, out), "--", *command], log, timeout_s)
    if rc != 0 or not out.exists():
        return failure("py-spy", rc, log, timeout_s)
    return {"samples_file": str(out), "log": str(log), **summarize(out.read_text())}


@contextmanager
def recording(base: Path) -> Iterator[dict[str, Any]]:
    """Sample this process and its children while the block runs; the yielded dict holds the summary
    (or ``skipped``/``error``) once the block has ended."""
    found: dict[str, Any] = {}
    spy = _spy()
    if spy is None:
        found["skipped"] = MISSING
        yield found
        return
    out, log = base.with_suffix(".pyspy.txt"), base.with_suffix(".pyspy.log")
    with log.open("w") as sink:
        proc = subprocess.Popen([*_args(spy, out), "--nonblocking", "--pid", str(os.getpid())],
                                stdout=sink, stderr=subprocess.STDOUT)
    time.sleep(ATTACH_S)
    try:
        yield found
    finally:
        proc.send_signal(signal.SIGINT)  # py-spy writes its file and exits
        try:
            rc: int | None = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            rc = None
        if rc == 0 and out.exists():
            found.update({"samples_file": str(out), "log": str(log), **summarize(out.read_text())})
        else:
            found.update(failure("py-spy", rc, log, 60))


def summarize(folded: str) -> dict[str, Any]:
    """py-spy's folded stacks as: ``samples``; ``top_self``, the frames the samples were in (a
    function and its file, lines merged) with their share; ``processes``, each process's share (a
    child's samples are its own, not its parent's)."""
    leaf: Counter[str] = Counter()
    processes: Counter[str] = Counter()
    total = 0
    for line in folded.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames, n = stack.split(";"), int(count)
        total += n
        owners = [f for f in frames if f.startswith("process ")]  # a child's stack: parent;child;frames
        if owners:
            processes[owners[-1].split(":", 1)[0]] += n
            frames = frames[len(owners):] or frames
        leaf[_LINE.sub(")", frames[-1])] += n
    share = (lambda n: n / total) if total else (lambda n: 0.0)
    return {"samples": total, "top_self": [[f, share(n)] for f, n in leaf.most_common(TOP)],
            "processes": [[p, share(n)] for p, n in processes.most_common(TOP)]}
