"""The per-pair subprocess: ``python -m aisp.harness.worker SPEC.json``.

It runs one pair (or, for --cold-start, one variant) and writes raw records to the spec's
``result_path`` atomically. The runner turns them into statistics. If this process dies (a
segfault, an abort, the OOM killer, a timeout) no result appears and the runner records why.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from aisp.harness import distributed
from aisp.harness.artifacts import atomic_write_text
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
        "spacer_ms": var.spacer_ms,
        "checked_call": var.checked_call,
        "verification": var.evidence.to_dict(),
        "memory": var.memory,
        "metrics": var.metrics,
        "throttled_samples": {str(i): r for i, r in var.throttled.items()},
    }


def _on_timed_hook(spec: dict[str, Any]):
    """The spec's ``on_timed`` (``module:function``, e.g. the profiler's capture), called after
    timing with the live variants' benchmarks and the pair's profile folder."""
    if not spec.get("on_timed"):
        return None
    module, _, name = spec["on_timed"].partition(":")
    fn = getattr(importlib.import_module(module), name)
    out_dir = Path(spec["profile_dir"])

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
    if distributed.current_rank() is not None:
        variants, workload, skip = distributed.run_ranked(paths, options, bool(spec.get("single")), telemetry, plan)
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


def main(argv: list[str]) -> int:
    started = time.time()  # the runner measures process start and imports up to here
    if parent := os.environ.get(distributed.PARENT_PID_ENV):  # a SIGKILLed CLI leaves no worker on the GPU
        distributed.die_with_parent(int(parent))
    spec = json.loads(Path(argv[0]).read_text())
    result_path = Path(spec["result_path"])
    cpu_share = apply_share_from_env()
    if spec.get("phase_path"):  # the step this worker is in, for the runner's display (written whole)
        RECORDER.listener = lambda name: atomic_write_text(Path(spec["phase_path"]), name)
    failed = False
    try:
        doc = run_spec(spec, argv[0])
    except Exception as exc:  # the pair failed; say why in its result rather than crash
        traceback.print_exc()
        verdict, reason = describe_error(exc, bool(spec["options"].get("reproducible")))
        doc, failed = {"status": verdict, "reason": distributed.label(reason)}, True
    doc = {**doc, "phases": RECORDER.seconds, "clock": {"started": started, "finished": time.time()},
           "cpu_share": cpu_share}
    distributed.write_result(result_path, doc, failed)
    sys.stdout.flush()
    return 1 if failed and distributed.current_rank() is not None else 0  # torchrun then stops the others


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # The result is written and the pair torn down: skip the interpreter's teardown (module finalizers,
    # the CUDA context; about 0.7 s a pair on a CPU). The runner ends any process the pair left behind.
    os._exit(code)
