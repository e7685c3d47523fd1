"""The per-pair subprocess: ``python -m aisp.harness.worker SPEC.json``.

It runs one pair (or, for --cold-start, one variant) and writes raw records to the spec's
``result_path`` atomically. The runner turns them into statistics. If this process dies (a
segfault, an abort, the OOM killer, a timeout) no result appears and the runner records why.

A rank of a multi-rank pair runs this file too, forked from the worker (:mod:`aisp.harness.distributed`).

``python -m aisp.harness.worker --serve`` is the reused worker of ``--reuse-workers``: it reads one
spec path per line on stdin and runs each as above, in turn, putting the process back between pairs
(:mod:`aisp.harness.isolation`); its output goes to each spec's ``log_path``. A pair that needs
several ranks gets ``{"status": "fresh"}`` (the runner starts a fresh worker for it), and a pair
that leaves state behind gets its result and then the worker exits (``retired`` says why).
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from aisp.harness import distributed, isolation
from aisp.harness.artifacts import atomic_write_json, atomic_write_text
from aisp.harness.execute import ColdCheck, Variant, describe_error, run_variants, time_single, workload_dict
from aisp.harness.options import RunOptions
from aisp.harness.phases import RECORDER
from aisp.harness.scheduler import apply_share_from_env
from aisp.harness.timing import SAMPLE_KEYS
from aisp.harness.verify import CheckPlan


def raw_record(var: Variant) -> dict[str, Any]:
    return {
        "name": var.name,
        "file": str(var.path),
        "verdict": var.verdict,
        "reason": var.reason,
        **{key: getattr(var, key) for key in SAMPLE_KEYS},
        "solo_samples_ms": var.solo_samples_ms,
        "solo_clock_mhz": var.solo_clock_mhz,
        "timed_clock_mhz": var.timed_clock_mhz,
        "spacer_ms": var.spacer_ms,
        "starved_samples": var.starved_samples,
        "retaken_samples": var.retaken_samples,
        "syncs_inside": var.syncs_inside,
        "stream_leftover_us": var.stream_leftover_us,
        "checked_call": var.checked_call,
        "verification": var.evidence.to_dict(),
        "memory": var.memory,
        "metrics": var.metrics,
        "throttled_samples": {str(i): r for i, r in var.throttled.items()},
    }


def _on_timed_hook(spec: dict[str, Any], rank: int = 0):
    """The spec's ``on_timed`` (``module:function``, e.g. the profiler's capture), called after
    timing with the live variants' benchmarks and the pair's profile folder (``rank<R>`` in it for
    rank R > 0 of a multi-rank pair: rank 0's capture is the one the result takes)."""
    if not spec.get("on_timed"):
        return None
    module, _, name = spec["on_timed"].partition(":")
    fn = getattr(importlib.import_module(module), name)
    out_dir = Path(spec["profile_dir"]) / (f"rank{rank}" if rank else "")

    def hook(variants: list[Variant], device: torch.device) -> None:
        fn({v.name: v.bench for v in variants}, out_dir)
    return hook


def _report_timeout(spec: dict[str, Any], seconds: float) -> None:
    """Tell the runner this pair's own timeout (it polls for the file: written whole, never half)."""
    if spec.get("timeout_path"):
        atomic_write_text(Path(spec["timeout_path"]), str(seconds))


def run_spec(spec: dict[str, Any], spec_path: str | None = None) -> dict[str, Any]:
    """Run what the spec asks and return the raw result document. Given ``spec_path``, a pair that
    needs several ranks makes this process torchrun's agent, which runs this worker once per rank
    (see aisp.harness.distributed)."""
    options = RunOptions.from_dict(spec["options"])
    paths, plan = [Path(p) for p in spec["paths"]], CheckPlan(**spec["plan"])
    if spec_path is not None:
        distributed.relaunch_if_needed(paths[0], options, lambda w: _report_timeout(spec, w.timeout_s), spec_path,
                                       Path(spec["result_path"]))
    telemetry: dict[str, Any] = {}
    if (rank := distributed.current_rank()) is not None:
        variants, workload, skip = distributed.run_ranked(paths, options, bool(spec.get("single")), telemetry, plan,
                                                          _on_timed_hook(spec, rank.rank))
    elif spec.get("single"):
        cold = ColdCheck(plan, Path(spec["cold_reference"]), spec["cold_baseline"])
        var = time_single(paths[0], options, cold, on_workload=lambda w: _report_timeout(spec, w.timeout_s))
        return {"status": "done", "variants": [raw_record(var)]}
    else:
        variants, workload, skip = run_variants(paths, options, _on_timed_hook(spec),
                                                on_workload=lambda w: _report_timeout(spec, w.timeout_s),
                                                telemetry_out=telemetry, plan=plan)
    doc: dict[str, Any] = {"workload": workload_dict(workload) if workload else None, "telemetry": telemetry}
    if skip:
        return {**doc, "status": "skipped", "reason": skip}
    return {**doc, "status": "done", "variants": [raw_record(v) for v in variants]}


def run_one(spec: dict[str, Any], spec_path: str | None, started: float, cpu_share: dict[str, Any],
            serving: bool = False) -> tuple[dict[str, Any], bool]:
    """Run one spec and return its result document (phases and clock added) and whether it failed.
    ``serving``: in a reused worker, where a pair that needs ranks is handed back (status "fresh")."""
    RECORDER.seconds = {}
    if spec.get("phase_path"):  # the step this worker is in, for the runner's display (written whole)
        RECORDER.listener = lambda name: atomic_write_text(Path(spec["phase_path"]), name)
    failed = False
    try:
        if serving and distributed.needs_ranks(Path(spec["paths"][0]), RunOptions.from_dict(spec["options"])):
            doc = {"status": "fresh", "reason": "needs several ranks: runs in a fresh worker"}
        else:
            doc = run_spec(spec, spec_path)
    except Exception as exc:  # the pair failed; say why in its result rather than crash
        traceback.print_exc()
        verdict, reason = describe_error(exc, bool(spec["options"].get("reproducible")))
        doc, failed = {"status": verdict, "reason": distributed.label(reason)}, True
    RECORDER.listener = None
    return {**doc, "phases": RECORDER.seconds, "clock": {"started": started, "finished": time.time()},
            "cpu_share": cpu_share}, failed


def main(argv: list[str]) -> int:
    started = time.time()  # the runner measures process start and imports up to here
    gc.freeze()  # the imports' objects: the gc.collect() calls around each setup no longer walk them
    if argv[:1] == ["--serve"]:
        return serve(started)
    if parent := os.environ.get(distributed.PARENT_PID_ENV):  # a SIGKILLed CLI leaves no worker on the GPU
        distributed.die_with_parent(int(parent))
    spec = json.loads(Path(argv[0]).read_text())
    doc, failed = run_one(spec, argv[0], started, apply_share_from_env())
    distributed.write_result(Path(spec["result_path"]), doc, failed)
    sys.stdout.flush()
    return 1 if failed and distributed.current_rank() is not None else 0  # torchrun then stops the others


def _watch_parent(parent: int) -> None:
    """End this process when the runner is gone. (Not PR_SET_PDEATHSIG: that fires when the runner's
    thread that started this worker ends, and a reused worker outlives the job that started it.)"""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)
    threading.Thread(target=watch, daemon=True).start()


def _log_to(path: str) -> None:
    """Send this process's stdout and stderr (file descriptors 1 and 2, so native code's output too) to ``path``."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def serve(started: float) -> int:
    """The reused worker's loop: one spec path per line on stdin, until EOF or a pair leaves state behind."""
    if parent := os.environ.get(distributed.PARENT_PID_ENV):
        _watch_parent(int(parent))
    cpu_share = apply_share_from_env()
    before = isolation.snapshot()
    for count, line in enumerate(sys.stdin):
        spec = json.loads(Path(line.strip()).read_text())
        _log_to(spec["log_path"])
        doc, _ = run_one(spec, None, started if count == 0 else time.time(), cpu_share, serving=True)
        left = isolation.restore(before)
        if left:
            doc["retired"] = f"the worker was retired after this pair: it left {', '.join(left)} changed"
        atomic_write_json(Path(spec["result_path"]), doc)
        sys.stdout.flush()
        sys.stderr.flush()
        if left:
            return 0
    return 0


if __name__ == "__main__":  # also each rank torchrun forks from the agent runs this file (runpy.run_path)
    code = distributed.run_forked_rank(main, sys.argv[1:]) if distributed.forked_rank() else main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # The result is written and the pair torn down: skip the interpreter's teardown (see end_worker).
    # The runner ends any process the pair left behind.
    distributed.end_worker(code)
