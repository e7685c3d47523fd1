"""``check_kernel``: a kernel sent as source text, checked against a reference in a worker process
(``aisp.check.worker``) started by the harness's ``spawn``: its timeout, then its process-group
kill, so the server never imports or runs the text. What the check does is fixed here, not by the
caller: edge and random sizes, refilled inputs, the harness's tolerance for the output's dtype, and
a seed drawn per call (an answer table built for one seed fails the next)."""

from __future__ import annotations

import random
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from aisp.harness.runner import Budget, spawn
from aisp.mcp.models import CaseOutcome, KernelCheck, Speedup
from aisp.mcp.policy import SandboxPolicy

NAME = re.compile(r"^[A-Za-z_]\w*$")


@dataclass(frozen=True)
class KernelRequest:
    """What the caller sends: the code and the cases, nothing about how they are judged."""

    source: str
    function: str
    reference: str
    """A function name in ``reference_source``, or MODULE:FUNCTION importable from the repository root."""
    reference_source: str | None
    shapes: list[str]
    dims: dict[str, int]
    dtypes: list[str]


def check_source(request: KernelRequest, work: Path, policy: SandboxPolicy) -> KernelCheck:
    """Write the sources to files of their own, run the check in a worker, return its outcome."""
    if policy.references and (request.reference_source is not None or request.reference not in policy.references):
        return KernelCheck(verdict="usage", reason="this server checks against its own references only: "
                           + ", ".join(policy.references))
    names = [request.function] + ([request.reference] if request.reference_source is not None else [])
    if bad := [n for n in names if not NAME.match(n)]:
        return KernelCheck(verdict="usage", reason=f"'{bad[0]}' is not a Python function name")
    folder = work / f"check-{secrets.token_hex(4)}"
    folder.mkdir(parents=True)
    kernel_file, reference = folder / "kernel_under_check.py", request.reference
    kernel_file.write_text(request.source)
    if request.reference_source is not None:
        (folder / "reference.py").write_text(request.reference_source)
        reference = f"{folder / 'reference.py'}:{request.reference}"
    spec = {"kernel": f"{kernel_file}:{request.function}", "reference": reference, "shapes": request.shapes,
            "dims": [f"{k}={v}" for k, v in request.dims.items()], "dtypes": request.dtypes,
            "timeout_s": policy.timeout_s,
            "check": {"device": policy.device, "seed": random.SystemRandom().randrange(2**31),
                      "random": policy.random, "edges": True, "iterations": policy.iterations,
                      "warmup": policy.warmup}}
    doc, status, reason = spawn(spec, folder, Budget(), "check", module="aisp.check.worker")
    if doc is None:
        return KernelCheck(verdict="timeout" if status == "timeout" else "error", reason=reason)
    if "usage" in doc:
        return KernelCheck(verdict="usage", reason=doc["usage"])
    return outcome(doc["result"])


def outcome(result: dict) -> KernelCheck:
    """A ``CheckResult.to_dict()`` as the tool's typed output."""
    def speedup(raw: dict | None) -> Speedup | None:
        return Speedup(**raw) if raw else None
    cases = [CaseOutcome(label=c["label"], verdict=c["verdict"], check=c["check"], reason=c["reason"],
                         speedup=speedup(c["speedup"])) for c in result["cases"]]
    verdict = result["verdict"] if result["verdict"] != "slower" else "ok"
    return KernelCheck(verdict=verdict, reason="; ".join(result["errors"]), device=result["device"],
                       speedup=speedup(result["speedup"]), cases=cases)
