"""Where a worker's seconds go: ``with phase("setup"): ...`` (or ``@phase("verify")`` on a function).

Each phase counts only its own time: a phase entered inside another (a setup inside verification)
pauses the outer one, so the phases of a process add up to the time spent inside any of them. The
runner adds what only it sees: process start and imports before the worker's first line, and the
exit after its result (see :func:`pair_phases`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

ORDER = ("start", "import", "setup", "verify", "warmup", "timed", "memory", "profile", "teardown", "other", "exit")
"""The phases a pair's result lists, in the order they happen: start (Python, torch and aisp imports
until the worker's first line), import (the pair's files), setup, verify, warmup, timed, memory,
profile (the on-timed hook), teardown, other (the worker's time in no phase), exit (result written
until the process is gone)."""


class Recorder:
    """Seconds per phase in this process (exclusive of nested phases)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._stack: list[list[Any]] = []
        self.listener: Callable[[str], None] | None = None
        """Told where the process is whenever a phase is entered or left: the phases it is inside,
        outermost first ("verify > setup"; "" outside every phase). The worker passes it on to the
        runner's display."""

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        now = time.perf_counter()
        if self._stack:
            outer = self._stack[-1]
            self.seconds[outer[0]] = self.seconds.get(outer[0], 0.0) + now - outer[1]
        self._stack.append([name, now])
        self._tell()
        try:
            yield
        finally:
            now = time.perf_counter()
            inner = self._stack.pop()
            self.seconds[name] = self.seconds.get(name, 0.0) + now - inner[1]
            if self._stack:
                self._stack[-1][1] = now
            self._tell()

    def _tell(self) -> None:
        if self.listener is not None:
            self.listener(" > ".join(name for name, _ in self._stack))


RECORDER = Recorder()
phase = RECORDER.phase
"""``with phase(name):`` or ``@phase(name)``: count the block's (the call's) own seconds as ``name``."""


def pair_phases(docs: list[dict[str, Any]]) -> dict[str, float]:
    """A pair's phases from its workers' documents (several for --cold-start), each carrying the
    worker's ``phases`` and ``clock`` (``spawned``/``started``/``finished``/``ended``, epoch seconds:
    the runner's Popen, the worker's first line, its result written, the process gone); ``total`` is
    the workers' wall time."""
    out: dict[str, float] = {}
    for doc in docs:
        clock, seconds = doc.get("clock") or {}, dict(doc.get("phases") or {})
        if {"spawned", "started", "finished", "ended"} <= set(clock):
            seconds["other"] = max(0.0, clock["finished"] - clock["started"] - sum(seconds.values()))
            seconds["start"] = clock["started"] - clock["spawned"]
            seconds["exit"] = clock["ended"] - clock["finished"]
            seconds["total"] = clock["ended"] - clock["spawned"]
        for name, value in seconds.items():
            out[name] = out.get(name, 0.0) + value
    return {name: round(out[name], 4) for name in (*ORDER, "total") if name in out}
