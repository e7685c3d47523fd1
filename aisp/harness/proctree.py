"""Killing a tool's whole process tree without a race: a process it starts while it is being killed.

A tool run under a timeout (torchrun, Nsight Compute, py-spy) may start processes in sessions of their
own (torchrun's ranks), which its process group misses, so its descendants are listed and killed one
by one. Listed, then killed, a child the tool starts between the two is neither: it would outlive the
run, holding a GPU. So the tree is frozen first: SIGSTOP to the group and to every process found,
listing again until no new one appears (a stopped process starts nothing more), and only then SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess

import psutil

FREEZE_ROUNDS = 100
"""At most this many listings while freezing (each round stops what the last one found)."""


def _tree(pid: int, marker: str | None) -> list[psutil.Process]:
    """The living descendants of ``pid`` and, with ``marker``, every process whose command line holds it."""
    try:
        found = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        found = []
    if marker is not None:
        for each in psutil.process_iter(["cmdline"]):
            if marker in " ".join(each.info["cmdline"] or []):
                found.append(each)
    return found


def kill_tree(proc: subprocess.Popen, marker: str | None = None, grace_s: float = 10.0) -> list[int]:
    """SIGKILL ``proc``, its process group and every process under it (and, with ``marker``, every process
    whose command line holds it: one orphaned in a session of its own), frozen first so that none it
    starts meanwhile escapes; wait up to ``grace_s`` for them to go and reap ``proc``. Returns the pids
    killed besides ``proc``'s."""
    frozen: dict[int, psutil.Process] = {}
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGSTOP)
    for _ in range(FREEZE_ROUNDS):
        new = [p for p in _tree(proc.pid, marker) if p.pid not in frozen and p.pid not in (proc.pid, os.getpid())]
        if not new:
            break
        for each in new:
            frozen[each.pid] = each
            with contextlib.suppress(psutil.Error):
                each.suspend()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    for each in frozen.values():
        with contextlib.suppress(psutil.Error):
            each.kill()
    psutil.wait_procs(list(frozen.values()), timeout=grace_s)
    proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    return sorted(frozen)
