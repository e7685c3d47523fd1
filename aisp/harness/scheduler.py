"""Placing pairs on the GPUs of one node (``--gpus``) and splitting a run across machines (``--shard``).

Pure logic, no CUDA: the GPUs, their NUMA cores and NVLink peers come in as a :class:`Topology`
(built by :mod:`aisp.system.gpu_topology` on a real host, by hand in the tests), and each pair's
GPU count, expected seconds and link as a :class:`Hint` (from stored expectations, else defaults).

- Each GPU gets a CPU share: ``cores // GPUs`` threads (``OMP_NUM_THREADS``, torch's threads) and,
  where its NUMA node is known, a slice of that node's cores of its own (affinity), so workers never
  oversubscribe the host.
- Jobs start biggest GPU group first, then longest first; the head of the queue (the first job the
  host-link rule lets start) waits for its group (a multi-GPU pair is never starved by single-GPU pairs
  taking every GPU that frees up).
- A pair bound by a host link (:data:`aisp.harness.names.HOST_RATE_LINKS`: pinned copies, the host's
  memory, page cache or page faults) never runs beside another such pair: both would share the host's
  memory bandwidth (on 2 x H200 a 512 MiB first touch took 354 ms alone and 527 beside a 16-thread
  host memcpy on the other GPU's cores; pinned copies beside pinned copies read unchanged, beside that
  memcpy 4% slower). While one runs, the others are passed over and keep their place in the queue.
- A multi-GPU pair gets GPUs that NVLink connects to each other where there are such, else any.
- ``--shard I/N`` is a greedy longest-first partition by expected seconds: the same pairs and
  hints give the same partition on every machine.
"""

from __future__ import annotations

import itertools
import os
import queue
import re
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

DEFAULT_SECONDS = 60.0
"""A pair's expected seconds when no stored expectation records them."""
CPUS_ENV, THREADS_ENV = "AISP_CPUS", "AISP_THREADS"
"""Set in a worker's environment by the runner: the cores it may run on, the threads it may use."""
THREAD_ENVS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


class PlacementError(ValueError):
    """GPUs asked for that this node does not have (bad usage)."""


@dataclass(frozen=True)
class Gpu:
    """One GPU the run may use."""

    ordinal: int
    """Its CUDA ordinal in the CLI's process."""
    visible: str
    """What a worker's CUDA_VISIBLE_DEVICES names it by (the ordinal, or the parent's own entry)."""
    cpus: tuple[int, ...] = ()
    """The cores of its NUMA node this process may use; () when unknown."""
    node: int | None = None


@dataclass(frozen=True)
class Topology:
    """The GPUs of a ``--gpus`` run; no GPU means one pair at a time with every GPU visible (the default)."""

    gpus: tuple[Gpu, ...] = ()
    cpu_count: int = field(default_factory=lambda: len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                           else os.cpu_count() or 1)
    """Cores this process may use."""
    nvlink: frozenset[frozenset[int]] = frozenset()
    """Pairs of ordinals that NVLink connects (directly or through an NVSwitch)."""

    def linked(self, group: tuple[int, ...]) -> bool:
        return all(frozenset(p) in self.nvlink for p in itertools.combinations(group, 2))


@dataclass(frozen=True)
class Hint:
    """What the scheduler knows of a pair before it runs."""

    gpus: int = 1
    seconds: float = DEFAULT_SECONDS
    host_link: bool = False
    """Its bytes cross a link whose rate the host sets (its stored ``link`` is one of ``HOST_RATE_LINKS``):
    it never runs beside another such pair."""


@dataclass(frozen=True)
class Share:
    """The GPUs and CPU share of one worker."""

    gpus: tuple[str, ...] = ()
    """CUDA_VISIBLE_DEVICES entries; () leaves the environment's as it is (the default run)."""
    threads: int | None = None
    """Threads per process (each rank of a multi-GPU pair); None: torch's default."""
    cpus: tuple[int, ...] = ()
    """Cores it may run on; (): no binding."""

    def env(self) -> dict[str, str]:
        """What the runner adds to the worker's environment."""
        env = {"CUDA_VISIBLE_DEVICES": ",".join(self.gpus)} if self.gpus else {}
        if self.threads is not None:
            env.update({name: str(self.threads) for name in (*THREAD_ENVS, THREADS_ENV)})
        if self.cpus:
            env[CPUS_ENV] = ",".join(map(str, self.cpus))
        return env

    def to_dict(self) -> dict[str, Any]:
        return {"gpus": list(self.gpus), "threads": self.threads, "cpus": format_cpus(self.cpus)}


NO_SHARE = Share()
"""The default run's: the environment's GPUs and torch's own thread count."""


def format_cpus(cpus: tuple[int, ...]) -> str:
    """``0-3,8`` for (0, 1, 2, 3, 8); "" for none."""
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and cpu == runs[-1][-1] + 1:
            runs[-1].append(cpu)
        else:
            runs.append([cpu])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def parse_gpus(text: str) -> str | int | tuple[int, ...]:
    """``all``, a count (``4``) or ordinals (``0,2,3``; one ordinal as ``2,``). Raises ValueError."""
    text = text.strip()
    if text == "all":
        return text
    if re.fullmatch(r"\d+", text) and int(text) >= 1:
        return int(text)
    if "," in text and re.fullmatch(r"\d+(,\d+)*,?", text):
        ordinals = tuple(int(x) for x in text.split(",") if x)
        if len(set(ordinals)) == len(ordinals):
            return ordinals
    raise ValueError(f"--gpus must be all, a count (4) or GPU ordinals (0,2,3), not '{text}'")


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` with 0 <= I < N. Raises ValueError."""
    match = re.fullmatch(r"(\d+)/(\d+)", text.strip())
    if not match or not int(match.group(1)) < int(match.group(2)):
        raise ValueError(f"--shard must be I/N with 0 <= I < N (0/4 ... 3/4), not '{text}'")
    return int(match.group(1)), int(match.group(2))


def cpu_shares(topo: Topology) -> dict[int, Share]:
    """Each GPU's share: ``cores // GPUs`` threads, and a slice of its NUMA node's cores of its own
    (the node's cores split evenly among the node's GPUs; one core each, in turn, where the node has
    fewer cores than GPUs); no binding where the node is unknown."""
    threads = max(1, topo.cpu_count // max(1, len(topo.gpus)))
    by_node: dict[tuple[int, ...], list[Gpu]] = {}
    for gpu in topo.gpus:
        by_node.setdefault(gpu.cpus, []).append(gpu)
    shares = {}
    for cpus, gpus in by_node.items():
        for k, gpu in enumerate(gpus):
            part = _slice(cpus, k, len(gpus))
            shares[gpu.ordinal] = Share((gpu.visible,), min(threads, len(part)) if part else threads, part)
    return shares


def _slice(cpus: tuple[int, ...], k: int, n: int) -> tuple[int, ...]:
    """The k-th of n even slices of ``cpus``; one core in turn when there are fewer cores than n."""
    if not cpus:
        return ()
    if len(cpus) < n:
        return (cpus[k % len(cpus)],)
    return cpus[k * len(cpus) // n:(k + 1) * len(cpus) // n]


def group_share(group: tuple[int, ...], shares: Mapping[int, Share]) -> Share:
    """The share of a worker holding ``group``: its GPUs, threads per rank, the union of their cores."""
    if not group:
        return Share()
    parts = [shares[o] for o in group]
    cpus = tuple(sorted({c for p in parts for c in p.cpus})) if all(p.cpus for p in parts) else ()
    return Share(tuple(g for p in parts for g in p.gpus), min(p.threads or 1 for p in parts), cpus)


def pick_group(free: set[int], size: int, topo: Topology) -> tuple[int, ...] | None:
    """``size`` free ordinals, NVLink-connected to each other where possible, lowest first; None if too few."""
    if len(free) < size:
        return None
    candidates = list(itertools.combinations(sorted(free), size))
    return next((g for g in candidates if topo.linked(g)), candidates[0])


def order(keys: list[str], hints: Mapping[str, Hint]) -> list[str]:
    """Biggest GPU group first, then longest first; ties by key (deterministic)."""
    def rank(key: str) -> tuple[int, float, str]:
        hint = hints.get(key, Hint())
        return -hint.gpus, -hint.seconds, key
    return sorted(keys, key=rank)


def partition(keys: list[str], hints: Mapping[str, Hint], count: int) -> list[list[str]]:
    """``count`` shards of ``keys``, balanced by expected seconds (longest first onto the lightest
    shard, ties to the lowest index); each shard keeps the input order."""
    loads, shards = [0.0] * count, [set() for _ in range(count)]
    for key in sorted(keys, key=lambda k: (-hints.get(k, Hint()).seconds, k)):
        lightest = min(range(count), key=lambda i: (loads[i], i))
        loads[lightest] += hints.get(key, Hint()).seconds
        shards[lightest].add(key)
    return [[k for k in keys if k in shard] for shard in shards]


@dataclass(frozen=True)
class Outcome:
    """What running a job gave: its result, or the GPU count it turned out to need (run it again)."""

    result: Any = None
    needs: int | None = None


Work = Callable[[str, Share, threading.Event], Outcome]
"""Runs one job (by key) with its share; returns promptly once the event is set (Ctrl-C)."""


@dataclass(frozen=True)
class Events:
    """What the scheduler tells its caller, always from the calling thread."""

    started: Callable[[str, Share], None]
    done: Callable[[str, Any], None]


def _size(hint: Hint, topo: Topology) -> int:
    return min(hint.gpus, len(topo.gpus)) if topo.gpus else 0


def _first_allowed(pending: list[str], hints: Mapping[str, Hint], host_busy: bool) -> int | None:
    """The index of the first pending job that may start: any while no host-link pair runs, else the
    first that is not one; None when every pending job is one and one runs."""
    for index, key in enumerate(pending):
        if not (host_busy and hints.get(key, Hint()).host_link):
            return index
    return None


def run_jobs(keys: list[str], hints: Mapping[str, Hint], topo: Topology, work: Work, events: Events) -> None:
    """Run every job, each in a thread of its own holding its GPUs; with no GPU in ``topo``, one at
    a time. However this ends (Ctrl-C raised here too), every job's thread is told to stop and joined."""
    hints, shares = dict(hints), cpu_shares(topo)
    pending, free = order(keys, hints), {g.ordinal for g in topo.gpus}
    finished: queue.Queue = queue.Queue()
    stop, threads, running, host_running = threading.Event(), [], 0, set()

    def call(key: str, group: tuple[int, ...], share: Share) -> None:
        try:
            finished.put((key, group, work(key, share, stop)))
        except BaseException as exc:  # the main thread re-raises it
            finished.put((key, group, exc))

    try:
        while pending or running:
            while pending and not (not topo.gpus and running):
                index = _first_allowed(pending, hints, bool(host_running))
                if index is None:
                    break  # only host-link pairs wait, and one runs
                group = pick_group(free, _size(hints.get(pending[index], Hint()), topo), topo)
                if group is None:
                    break  # the first that may start waits for its group
                key, share = pending.pop(index), group_share(group, shares)
                free -= set(group)
                running += 1
                if hints.get(key, Hint()).host_link:
                    host_running.add(key)
                events.started(key, share)
                threads.append(thread := threading.Thread(target=call, args=(key, group, share), daemon=True))
                thread.start()
            key, group, outcome = _next(finished)
            free |= set(group)
            running -= 1
            host_running.discard(key)
            if isinstance(outcome, BaseException):
                raise outcome
            if outcome.needs and len(group) < min(outcome.needs, len(topo.gpus)):  # more GPUs would help
                hints[key] = replace(hints.get(key, Hint()), gpus=outcome.needs)
                pending = order([*pending, key], hints)
                continue
            events.done(key, outcome.result)
    finally:
        stop.set()
        for thread in threads:
            thread.join()


def _next(finished: queue.Queue) -> tuple[str, tuple[int, ...], Any]:
    """The next finished job; waits in short steps so a signal reaches this thread at once."""
    while True:
        try:
            return finished.get(timeout=0.2)
        except queue.Empty:
            continue


def apply_share_from_env() -> dict[str, Any]:
    """In a worker: move every thread of this process onto ``$AISP_CPUS`` and cap torch's threads at
    ``$AISP_THREADS``; returns what now holds (cores allowed, torch threads)."""
    import torch

    cpus = os.environ.get(CPUS_ENV)
    if cpus and hasattr(os, "sched_setaffinity"):
        wanted = {int(c) for c in cpus.split(",")}
        for tid in os.listdir("/proc/self/task"):
            try:
                os.sched_setaffinity(int(tid), wanted)
            except (ProcessLookupError, PermissionError, OSError):
                continue
    if os.environ.get(THREADS_ENV):
        torch.set_num_threads(int(os.environ[THREADS_ENV]))
    inductor = sys.modules.get("torch._inductor.config")
    if inductor is not None and hasattr(inductor, "decide_compile_threads"):
        # imported before this share held (a zygote's child): its compile workers were counted on every core
        inductor.compile_threads = inductor.decide_compile_threads()
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    return {"threads": torch.get_num_threads(), "cpus": format_cpus(tuple(allowed))}
