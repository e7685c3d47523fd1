"""Is the host quiet enough for a pair's figures to be judged? Readings before and after each pair.

A pair is timed on a *busy* host when any of these holds (each with its figures in ``busy``):

- **CPU oversubscribed**: the 1-minute load average exceeds the host's cores at both readings
  (before and after the pair). The run's own workers are given at most the cores (one pair at a
  time: all of them; ``--gpus``: a share each, together the cores), so load beyond the cores is
  threads waiting for one, ours included: CPU-bound baselines ran 45-65x slower that way.
- **another process on the pair's GPU**: a compute process that is not this run's (NVML's running
  compute processes of the pair's GPUs, read by a hook of the caller: the harness imports no tool).
- **CPU steal**: more than ``STEAL_LIMIT`` of the host's CPU time over the pair went to other
  virtual machines (``steal`` in ``/proc/stat``).
- **the pair starved of CPU**: while it was timed, the worker's threads waited in the run queue
  more than ``STARVED_LIMIT`` times as long as they ran (``/proc/self/task/*/schedstat``, read by
  the worker around its timed iterations). The load average misses this when the contention starts
  with the pair: two runs started together on one 2 x H200 host (2026-11-28) took
  ch16:gpu_sampling's CPU baseline from 78 ms to 2,100 ms while the 1-min load read 1.7 before it.

A busy result keeps its figures and is reported; it is neither judged against expectations nor
stored (``not-compared: host busy``).

A quiet host is not a fast one: each pair's worker also reads the host's speed (:func:`dispatch_us`),
which the judge uses to hold host-bound figures only against runs on a host of similar speed.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from aisp.harness.timing import gc_disabled

STEAL_LIMIT = 0.05
"""Share of CPU time taken by the hypervisor above which the host counts as busy."""
STARVED_LIMIT = 3.0
"""Run-queue wait over CPU time of the worker's threads (while timed) above which the pair was
starved: it got under a quarter of the CPU it asked for. Two busy processes per core read about 1."""
STARVED_MIN_S = 0.05
"""CPU time the threads must have run for the ratio to count (a pair that barely uses the CPU)."""
DISPATCH_CALLS, DISPATCH_REPEATS = 500, 5
"""Calls per window and windows of the worker's :func:`dispatch_us` (3,000 calls with the warm-up
window: 10-17 ms at the 3.45-5.76 us the H200 hosts' peaks files read). Every pair run pays it, the
test suite's pair runs on a 2-core CI host included (8,000 calls took 0.3 s on a busy 2-core machine)."""
PROC_STAT = Path("/proc/stat")
TASKS = Path("/proc/self/task")
THREAD_STAT = Path("/proc/thread-self/stat")


@dataclass(frozen=True)
class Reading:
    """The host at one moment."""

    load_1m: float | None
    """1-minute load average; None where the OS has none."""
    cpu_ticks: tuple[int, int] | None
    """(all, steal) CPU ticks since boot from ``/proc/stat``; None off Linux."""
    gpu_pids: tuple[int, ...] | None
    """Processes with a compute context on the pair's GPUs; None where NVML cannot say (or no GPU)."""


_STARTED: set[int] = set()
"""Processes this run started or saw among its own (workers, their ranks). NVML still lists a worker
for a moment after it has exited: in a whole-book run on 4 x H200 (2026-11-28) 8 pairs were marked
busy by the pid of a worker of this run, gone from its process tree but not yet from NVML's list."""


def remember(pids: Iterable[int]) -> None:
    """Count these processes as this run's own from now on (see ``_STARTED``)."""
    _STARTED.update(pids)


def own_processes(living: Iterable[int]) -> set[int]:
    """This run's processes: ``living`` (this process and its descendants now) and every one remembered."""
    remember(living)
    return set(_STARTED)


def cpu_ticks(text: str) -> tuple[int, int] | None:
    """(all, steal) ticks from the ``cpu`` line of ``/proc/stat`` text (user nice system idle iowait
    irq softirq steal ...; guest time is already inside user)."""
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu" and len(fields) > 8:
            ticks = [int(x) for x in fields[1:9]]
            return sum(ticks), ticks[7]
    return None


def schedstat(tasks: Path = TASKS) -> tuple[int, int] | None:
    """(ns on a CPU, ns waiting in a run queue) summed over this process's threads (the first two
    fields of each thread's ``schedstat``); None where the kernel does not keep them."""
    ran = waited = 0
    found = False
    for task in tasks.glob("*/schedstat") if tasks.is_dir() else ():
        try:
            fields = task.read_text().split()
        except OSError:  # the thread ended
            continue
        ran, waited, found = ran + int(fields[0]), waited + int(fields[1]), True
    return (ran, waited) if found else None


def cpu_wait(before: tuple[int, int] | None, after: tuple[int, int] | None) -> dict[str, float] | None:
    """Seconds the threads ran and waited between two :func:`schedstat` readings."""
    if before is None or after is None:
        return None
    return {"ran_s": (after[0] - before[0]) / 1e9, "waited_s": (after[1] - before[1]) / 1e9}


def worst_wait(waits: Iterable[dict[str, float] | None]) -> dict[str, float] | None:
    """Of several ranks' :func:`cpu_wait`, the one that waited longest per second it ran (None if none)."""
    known = [w for w in waits if w]
    return max(known, key=lambda w: w["waited_s"] / max(w["ran_s"], 1e-9)) if known else None


def dispatch_us(calls: int = DISPATCH_CALLS, repeats: int = DISPATCH_REPEATS) -> float:
    """Host cost (us) of one torch op from Python (binding, dispatcher, a one-element CPU kernel):
    ``x.add_(1.0)`` on a 1-element CPU tensor, ``calls`` back to back per window, the median of
    ``repeats`` windows after one that warms up, GC off. The speed of the host's launch path, which
    host-bound figures move with: ``aisp peak``'s ``dispatch_torch_op`` (this function) read 3.45,
    4.19 and 5.76 us on three H200 hosts whose CPU model string is the same."""
    x = torch.zeros(1)

    def window() -> float:
        t0 = time.perf_counter()
        for _ in range(calls):
            x.add_(1.0)
        return (time.perf_counter() - t0) * 1e6 / calls

    window()
    with gc_disabled():
        return statistics.median(window() for _ in range(repeats))


def current_cpu() -> int | None:
    """The CPU the calling thread ran on last (``/proc/thread-self/stat``'s 39th field); None off Linux.
    Read beside :func:`dispatch_us`: on the H200 leases the reading depends on the core (one vCPU read
    5.0-5.6 us in three processes, two others 3.0-3.6), so a result says which core it was read on."""
    try:
        return int(THREAD_STAT.read_text().rsplit(")", 1)[1].split()[36])
    except (OSError, IndexError, ValueError):
        return None


def read(gpu_pids: Iterable[int] | None = None) -> Reading:
    """The host now; ``gpu_pids`` as the caller's NVML hook found them (None: unknown)."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    ticks = cpu_ticks(PROC_STAT.read_text()) if PROC_STAT.exists() else None
    return Reading(load, ticks, tuple(gpu_pids) if gpu_pids is not None else None)


def state(before: Reading, after: Reading, cores: int, own: Iterable[int] = (),
          waits: dict[str, float] | None = None) -> dict[str, Any]:
    """The readings around one pair, and ``busy``: why the host was busy (empty when quiet).
    ``own``: this run's processes (not counted as others on the GPU); ``waits``: the worker's
    :func:`cpu_wait` over its timed iterations, when it measured one."""
    steal = _steal(before.cpu_ticks, after.cpu_ticks)
    others = sorted({p for r in (before, after) for p in (r.gpu_pids or ())} - set(own))
    loads = [r.load_1m for r in (before, after) if r.load_1m is not None]
    busy = []
    if len(loads) == 2 and min(loads) > cores:
        busy.append(f"1-min load {min(loads):.1f} above the host's {cores} cores before and after the pair")
    if others:
        busy.append(f"other process(es) on the pair's GPU: pid {', '.join(map(str, others))}")
    if steal is not None and steal > STEAL_LIMIT:
        busy.append(f"CPU steal {steal:.1%} over the pair (limit {STEAL_LIMIT:.0%})")
    if waits and waits["ran_s"] >= STARVED_MIN_S and waits["waited_s"] > STARVED_LIMIT * waits["ran_s"]:
        busy.append(f"the pair's threads waited {waits['waited_s']:.2f} s for a CPU against {waits['ran_s']:.2f} s "
                    f"on one while timed (limit {STARVED_LIMIT:g}x)")
    gpu_known = before.gpu_pids is not None or after.gpu_pids is not None
    return {"load_1m": [before.load_1m, after.load_1m], "cores": cores, "steal": steal,
            "gpu_processes": others if gpu_known else None, "cpu_wait": waits, "busy": busy}


def _steal(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    if before is None or after is None or after[0] <= before[0]:
        return None
    return (after[1] - before[1]) / (after[0] - before[0])
