"""Pairs that run as several ranks: the torchrun launch, the process group, cross-rank verdicts.

A pair whose ``Requirements.world_size`` is above one is run by the same worker process: once it
has loaded the workload (and told the runner its timeout), the worker becomes torchrun's agent,
``torchrun --standalone --nproc-per-node N --start-method fork --run-path .../worker.py SPEC`` run in
this process, which forks each rank with torch, the harness and the pair imported (a new Python per
rank paid 2-3 s of CPU for them here, 3-4 s on a GPU host). Where a fork could not work
(:func:`aisp.harness.forking.fork_poisoned`: the CUDA driver queried, CPU threads started), each rank
is a new Python (``-m aisp.harness.worker SPEC``): with torch built for CUDA, always today, as loading
the pair asks the driver (a Benchmark's default device). The runner still waits on the worker's PID. Each rank then:

- joins a process group (NCCL with ``cuda:LOCAL_RANK`` on a GPU, gloo on a CPU);
- verifies its own optimized output against its own baseline output; after each verification
  pass the ranks exchange verdicts, so a failure on any rank fails the variant on all of them
  and every rank keeps calling the same collectives;
- times with a barrier before each timed call (outside the window); a sample is the slowest
  rank's time for that iteration, and each rank's median is kept;
- leaves writing to rank 0, except that a rank that raises writes its error and exits non-zero,
  so torchrun stops the other ranks at once.

A rank killed by a signal writes nothing, and its peers' errors (a closed connection) are only its
echo: the result then names that rank and the signal first (from every rank's exit status: of
forked ranks torchrun reports only the first failure it sees).

Timeouts: forked ranks stay in the agent's process group, which the runner's SIGTERM and SIGKILL
reach; ranks started as new Pythons are in sessions of their own, which the runner reaches through
the agent and the worker's token. Each rank asks Linux to SIGKILL it when the agent dies
(``PR_SET_PDEATHSIG``), so a rank that ignores SIGTERM still goes when the runner SIGKILLs the agent.

NVLink multicast stays off in every rank (``NVLS_OFF``): on shared hosts a program that uses it
can put the GPUs out of service.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import multiprocessing
import multiprocessing.util
import os
import signal
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from aisp.harness import host
from aisp.harness.artifacts import atomic_write_json
from aisp.harness.benchmark import Workload, unmet_requirements
from aisp.harness.execute import (
    Variant,
    measure_standing,
    pick_device,
    set_up,
    start,
    teardown,
    timed_with_telemetry,
    verify_checked,
    verify_seed,
)
from aisp.harness.forking import draw_own_seeds, fork_poisoned
from aisp.harness.loader import load_benchmark
from aisp.harness.options import RunOptions
from aisp.harness.phases import phase
from aisp.harness.results import VERDICT_ORDER
from aisp.harness.stats import summarize
from aisp.harness.timing import SAMPLE_KEYS
from aisp.harness.verify import CheckPlan, Evidence

NVLS_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
"""NVLink multicast off in NCCL, PyTorch symmetric memory and NVSHMEM; set in every rank."""
AGENT_PID_ENV, PARENT_PID_ENV = "AISP_TORCHRUN_PID", "AISP_PARENT_PID"  # torchrun's, the worker's parent's
"""Set by the launch: the PID torchrun runs as, so a rank knows it is one of ours."""
PR_SET_PDEATHSIG = 1
WORKER_SCRIPT = str(Path(__file__).with_name("worker.py"))
"""The worker's file, which torchrun runs (``runpy.run_path``, as ``__main__``) in each rank it forks."""
AGENT_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)  # torchrun's agent handles them
EVIDENCE_FIGURES = ("max_abs_err", "max_rel_err", "rel_l2_err", "rtol", "atol", "max_rel_l2")


@dataclass(frozen=True)
class Rank:
    """Where this process stands in the world torchrun started."""

    rank: int
    world_size: int
    local_rank: int


def rank_from_env() -> Rank:
    """The rank torchrun gave this process (RANK, WORLD_SIZE, LOCAL_RANK)."""
    return Rank(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"]))


def current_rank() -> Rank | None:
    """This process's rank when aisp launched it through torchrun, else None."""
    if AGENT_PID_ENV not in os.environ or "LOCAL_RANK" not in os.environ:
        return None
    return rank_from_env()


def launch_args(spec_path: str, ranks: int, fork: bool = True) -> list[str]:
    """torchrun's arguments that run the worker once per rank on this machine: in a process forked
    from the agent, or (``fork`` False) in a new Python per rank."""
    start = ["--start-method=fork", "--run-path", WORKER_SCRIPT] if fork else ["-m", "aisp.harness.worker"]
    return ["--standalone", f"--nproc-per-node={ranks}", *start, spec_path]


def launch_env() -> dict[str, str]:
    """What the agent adds to its environment, which the ranks inherit: NVLink multicast off and the
    agent's PID (this process's) recorded."""
    return {**NVLS_OFF, AGENT_PID_ENV: str(os.getpid()), PARENT_PID_ENV: ""}  # ranks: torchrun


def run_ranks(spec_path: str, ranks: int, result: Path) -> int:
    """torchrun, in this process, on the worker's spec (its ranks forked from here where a fork works);
    returns its exit status. When a rank died by a signal and no complete result was written to
    ``result``, it names that rank and signal first."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    fork = not fork_poisoned()
    if not fork:
        print("the ranks start as new Pythons: a process forked from this one could not use CUDA or torch's "
              "CPU threads", file=sys.stderr, flush=True)
    os.environ.update(launch_env())
    with _watching_forks() as forked:
        try:
            run(parse_args(launch_args(spec_path, ranks, fork)))
            return 0
        except ChildFailedError as err:  # a rank that raised wrote its reason; SIGTERM is torchrun stopping the rest
            codes = {rank: proc.exitcode for rank, proc in enumerate(forked)}
            codes.update((rank, failure.exitcode) for rank, failure in err.failures.items())
    killed = [(r, code) for r, code in sorted(codes.items()) if code is not None and code < 0 and code != -signal.SIGTERM]
    if killed:
        rank, code = killed[0]
        echo = json.loads(result.read_text()) if result.exists() else {}
        if echo.get("status") != "done":  # after a written result, only teardown was left
            why = f"rank {rank} killed by {signal.Signals(-code).name}"
            atomic_write_json(result, {"status": "error", "reason": why + (f"; then {echo['reason']}" if echo else "")})
    return 1


def _no_traceback(record: logging.LogRecord) -> bool:
    record.exc_info = None
    return True


@contextlib.contextmanager
def _watching_forks() -> Iterator[list[Any]]:
    """While torchrun runs here: the processes it forks, in rank order (of forked ranks it reports only
    the first failure it sees, maybe a killed rank's echo); its log of that failure without the
    traceback of its own join (formatting one imports ``torch._dynamo``: 2.7 s of CPU)."""
    import torch.multiprocessing as mp

    forked: list[Any] = []
    start_processes, log = mp.start_processes, logging.getLogger("torch.distributed.elastic.multiprocessing.api")

    def start(*args: Any, **kwargs: Any) -> Any:
        context = start_processes(*args, **kwargs)
        forked.extend(context.processes)
        return context
    mp.start_processes = start
    log.addFilter(_no_traceback)
    try:
        yield forked
    finally:
        mp.start_processes = start_processes
        log.removeFilter(_no_traceback)


def forked_rank() -> bool:
    """Whether this process is a rank that torchrun forked from its agent (not a new Python)."""
    return current_rank() is not None and multiprocessing.parent_process() is not None


def run_forked_rank(main: Callable[[list[str]], int], argv: list[str]) -> int:
    """``main(argv)`` in a rank forked from the agent, set first as a new process: the default action
    of the signals torchrun's agent handles (its handler raises: SIGTERM would not end a rank inside a
    collective), torch's threads from ``OMP_NUM_THREADS`` (read as a process starts), seeds of its own.
    What escapes ``main`` becomes a status as in a new Python: torchrun's wrapper would take it."""
    for sig in AGENT_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    threads = os.environ.get("OMP_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0:
        torch.set_num_threads(int(threads))
    draw_own_seeds()
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except BaseException:  # noqa: BLE001 - what Python itself would do at the top
        traceback.print_exc()
        return 1


def end_worker(code: int) -> None:
    """End this worker with ``code`` at once, without the interpreter's teardown (``os._exit``: module
    finalizers, the CUDA context; about 0.7 s a pair on a CPU). A forked rank that succeeded returns
    instead (torchrun waits for its return value), and multiprocessing's exit runs ``os._exit(0)`` as
    soon as the agent has every rank's, before it would join what the pair left running."""
    if code == 0 and forked_rank():
        multiprocessing.util.Finalize(None, os._exit, args=(0,), exitpriority=sys.maxsize)
        return
    os._exit(code)


def relaunch_if_needed(first: Path, options: RunOptions, on_workload: Callable[[Workload], None],
                       spec_path: str, result: Path) -> None:
    """Run torchrun's agent in this worker and exit with its status, when the pair needs several ranks
    and can run here. Returns when the pair runs in one process, when this already is a rank, or
    when a requirement is unmet (the normal path then reports the skip). The agent leaves CUDA alone
    (no context of its own on GPU 0; with torch built for CUDA it asks the driver as it loads the pair,
    so the ranks start as new Pythons there); the ranks check the compute capability."""
    if current_rank() is not None or (workload := needs_ranks(first, options)) is None:
        return
    ranks = workload.requires.world_size
    on_workload(workload)
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(run_ranks(spec_path, ranks, result))


def needs_ranks(first: Path, options: RunOptions) -> Workload | None:
    """The pair's workload when it needs several ranks and can run here (its requirements met), else None."""
    workload = load_benchmark(first).workload
    if workload.requires.world_size <= 1 or unmet_requirements(
            workload.requires, pick_device(options.device), capability=False):
        return None
    return workload


def die_with_parent(parent_pid: int) -> None:
    """SIGKILL this process when its parent (torchrun, or the CLI for a worker) dies; exit now if it has."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:
        os._exit(1)


def init(rank: Rank, device: torch.device, timeout_s: float) -> torch.device:
    """Join the process group: NCCL on ``cuda:LOCAL_RANK``, gloo on a CPU. Returns the device."""
    timeout = timedelta(seconds=timeout_s)
    if device.type != "cuda":
        dist.init_process_group("gloo", timeout=timeout)
        return device
    device = torch.device("cuda", rank.local_rank)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", timeout=timeout, device_id=device)
    return device


def gather(obj: Any) -> list[Any]:
    """Every rank's ``obj``, in rank order, on every rank."""
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def meet(value: Any = None) -> Any:
    """Ranks meet here and all take rank 0's ``value`` (before each timed call, and for the timing
    loop's choices every rank must make alike)."""
    return gather(value)[0]


def label(reason: str) -> str:
    """A reason prefixed with this process's rank when it is one."""
    rank = current_rank()
    return reason if rank is None else f"rank {rank.rank}: {reason}"


def agree(variants: list[Variant]) -> None:
    """Give every rank the same verdicts: a variant failed on any rank fails on all.

    Evidence keeps the worst error seen on any rank. A variant failed elsewhere is torn down
    here too, so every rank goes on with the same variants (and the same collectives).
    """
    everyone = gather([(v.verdict, v.reason, v.evidence.to_dict()) for v in variants])
    for i, var in enumerate(variants):
        records = [rec[i] for rec in everyone]
        for _, _, evidence in records:
            var.evidence.merge(Evidence(**{k: evidence[k] for k in EVIDENCE_FIGURES}))
        if len({(verdict, reason) for verdict, reason, _ in records}) == 1:
            continue  # agreed already: all pending, or failed alike in an earlier round
        failures = [(r, verdict, reason) for r, (verdict, reason, _) in enumerate(records) if verdict != "pending"]
        verdict = max((f[1] for f in failures), key=VERDICT_ORDER.index)
        var.fail(verdict, "; ".join(f"rank {r}: {reason}" for r, _, reason in failures))
        if var.bench is not None:
            var.bench.teardown()
            var.bench = None


def slowest(variants: list[Variant], info: dict[str, Any]) -> None:
    """Each sample (and its issue time and sync tail) becomes the slowest rank's; throttle flags are
    merged from every rank.
    ``info["median_ms_per_rank"]`` gets each variant's median on each rank (the imbalance)."""
    everyone = gather([([getattr(v, key) for key in SAMPLE_KEYS], v.throttled) for v in variants])
    medians = info.setdefault("median_ms_per_rank", {})
    for i, var in enumerate(variants):
        per_rank = [rec[i] for rec in everyone]
        for k, key in enumerate(SAMPLE_KEYS):  # events, host, issue time and sync tail alike
            setattr(var, key, [max(s) for s in zip(*(r[0][k] for r in per_rank), strict=True)])
        merged: dict[int, set[str]] = {}
        for _, throttled in per_rank:
            for idx, reasons in throttled.items():
                merged.setdefault(idx, set()).update(reasons)
        var.throttled = {idx: sorted(r) for idx, r in merged.items()}
        medians[var.name] = [summarize(r[0][0]).median for r in per_rank]


def merge_memory(variants: list[Variant]) -> None:
    """A variant's memory figures become the largest of any rank's; the per-rank peaks are kept."""
    everyone = gather([v.memory for v in variants])
    for i, var in enumerate(variants):
        per_rank = [rec[i] for rec in everyone]
        merged: dict[str, Any] = {}
        for key in per_rank[0]:
            values = [m.get(key) for m in per_rank]
            numeric = all(isinstance(x, (int, float)) for x in values)
            merged[key] = max(values) if numeric else values[0]
        merged["per_rank_peak_bytes"] = [m.get("peak_bytes") for m in per_rank]
        var.memory = merged


def _time_ranked(live: list[Variant], options: RunOptions, device: torch.device,
                 telemetry: dict[str, Any], check: CheckPlan | None = None) -> dict[int, Any]:
    """Time the live variants on every rank, then keep the slowest rank's samples (and the run-queue
    wait of the rank whose threads waited longest for a CPU per second run: the host-busy rule; and the
    slowest rank's op dispatch and the CPU it was read on, as its samples are the slowest rank's)."""
    last = timed_with_telemetry(live, options, device, telemetry, meet, check)
    slowest(live, telemetry["ranks"])
    telemetry["cpu_wait"] = host.worst_wait(gather(telemetry.get("cpu_wait")))
    read = [r for r in gather((telemetry.get("dispatch_us"), telemetry.get("dispatch_cpu"))) if r[0]]
    telemetry["dispatch_us"], telemetry["dispatch_cpu"] = max(read, key=lambda r: r[0], default=(None, None))
    return last


NOT_ALONE = "not timed alone before the other variants' setup (a multi-rank pair): a slowdown they cause is not checked"

OnTimed = Callable[[list[Variant], torch.device], None]
"""The worker's ``on_timed`` hook (the profiler's capture), called after timing with the standing variants."""


def _finish(live: list[Variant], device: torch.device, on_timed: OnTimed | None = None) -> None:
    """Memory and metrics of the variants still standing (the same on every rank); ``on_timed`` on
    every rank in step (a profiled run() of a multi-rank pair needs every rank's collectives), then
    teardown."""
    standing = measure_standing(live, device)
    merge_memory(standing)
    if on_timed is not None:
        with phase("profile"):
            on_timed(standing, device)
    teardown(live)


def _verify_and_time(variants: list[Variant], workload: Workload, options: RunOptions,
                     device: torch.device, telemetry: dict[str, Any], plan: CheckPlan,
                     on_timed: OnTimed | None = None) -> None:
    verify_seed(variants, workload, device, plan.fresh_seed, False, options.reproducible)
    agree(variants)
    before = verify_seed(variants, workload, device, options.seed, True, options.reproducible)
    agree(variants)
    live = [variants[0]] + [v for v in variants[1:] if v.verdict == "pending"]
    for var in live[1:]:
        var.evidence.checks.append(f"each of {dist.get_world_size()} ranks: matches that rank's baseline")
    if options.verify_only or len(live) < 2:
        teardown(variants)
        return
    variants[0].evidence.notes.append(NOT_ALONE)
    last = _time_ranked(live, options, device, telemetry, plan)
    verify_checked(live, last, workload, before)
    del last
    agree(live)
    _finish(live, device, on_timed)


def _time_alone(var: Variant, options: RunOptions, device: torch.device, telemetry: dict[str, Any]) -> None:
    """Cold start: one variant set up and timed alone on every rank (no verification)."""
    set_up(var, device, options.seed)
    _time_ranked([var], options, device, telemetry)
    _finish([var], device)


def run_ranked(paths: list[Path], options: RunOptions, single: bool, telemetry: dict[str, Any],
               plan: CheckPlan, on_timed: OnTimed | None = None) -> tuple[list[Variant], Workload, str | None]:
    """This rank's part of a pair run: what ``run_variants`` (or, ``single``, ``time_single``) does
    in one process, kept in step across ranks. ``telemetry["ranks"]`` describes the world.
    ``on_timed``: this rank's profiler capture, after timing (the worker gives each rank its folder)."""
    rank = current_rank()
    assert rank is not None, "run_ranked runs in a rank that aisp launched through torchrun"
    die_with_parent(int(os.environ[AGENT_PID_ENV]))
    device, variants, settings, workload = start(paths, options)
    skip = unmet_requirements(workload.requires, device)
    if skip:
        return variants, workload, skip
    device = init(rank, device, workload.timeout_s)
    telemetry["ranks"] = {"world_size": rank.world_size, "backend": dist.get_backend(),
                          "written_by_rank": rank.rank,
                          "timing": "per iteration, the slowest rank's time; ranks meet at a barrier "
                                    "before each timed call"}
    if options.profile != "none":
        telemetry["ranks"]["profile"] = ("every rank profiled in step: rank 0's capture is the pair's profile, "
                                         "rank R's in profiles/rank<R>") if on_timed else "not captured"
    if single:
        _time_alone(variants[0], options, device, telemetry)
    else:
        _verify_and_time(variants, workload, options, device, telemetry, plan, on_timed)
    settings.enter(None)
    dist.barrier()
    dist.destroy_process_group()
    return variants, workload, None


def write_result(path: Path, doc: dict[str, Any], failed: bool) -> None:
    """Write the worker's result document.

    Outside torchrun: always. In a rank: rank 0 writes the pair's result and a rank that failed
    writes its error, but only the first document written stays: the first failure is the cause,
    a later one on another rank (a peer's closed connection) is its echo.
    """
    rank = current_rank()
    if rank is None:
        atomic_write_json(path, doc)
    elif failed or rank.rank == 0:
        staged = path.with_name(f".{path.name}.rank{rank.rank}")
        atomic_write_json(staged, doc)
        try:
            os.link(staged, path)
        except FileExistsError:
            pass
        finally:
            staged.unlink()
