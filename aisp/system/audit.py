"""``aisp system audit``: run every check, order the findings (hardware faults first), pick the
exit code, and render them as a table or schema-versioned JSON."""

from __future__ import annotations

import dataclasses
import datetime
import platform
from collections import Counter
from collections.abc import Callable
from typing import Any

from aisp.system import checks_cpu, checks_gpu, checks_locality, checks_memory, checks_process
from aisp.system.model import AuditContext, Finding, Grade
from aisp.system.nvml import NvmlUnavailable

SCHEMA_VERSION = 1
EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_HARDWARE = 0, 1, 2, 3
EXIT_CODES_HELP = (
    "Exit codes: 0 no FAIL (WARN, SKIP and UNKNOWN allowed); 1 at least one setting graded FAIL "
    "(with --strict, UNKNOWN counts as FAIL); 2 bad usage; 3 a hardware fault (uncorrectable ECC "
    "errors, failed or pending row remapping, hardware slowdown) - outranks 1."
)
HOST_CHECKS = checks_cpu.CHECKS + checks_memory.CHECKS + checks_process.CHECKS
GPU_CHECKS = checks_gpu.DEVICE_CHECKS + checks_locality.CHECKS
_RANK = {Grade.FAIL: 1, Grade.WARN: 2, Grade.UNKNOWN: 3, Grade.SKIP: 4, Grade.PASS: 5}


def run_check(check_id: str, fn: Callable[..., Finding], ctx: AuditContext, *args: Any) -> Finding:
    """Run one check; an NVML refusal becomes SKIP/UNKNOWN, any other error UNKNOWN with its message."""
    try:
        return dataclasses.replace(fn(ctx, *args), check=check_id)
    except NvmlUnavailable as err:
        grade = Grade.SKIP if err.kind == "unsupported" else Grade.UNKNOWN
        label = {"unsupported": "not supported", "no_permission": "no permission", "error": "NVML error"}[err.kind]
        return Finding(grade, label, "-", err.detail, check=check_id)
    except Exception as err:  # noqa: BLE001 - reported as UNKNOWN with the error, never hidden
        return Finding(Grade.UNKNOWN, f"{type(err).__name__}: {err}", "-", fn.__module__ + "." + fn.__name__,
                       check=check_id)


def run_audit(ctx: AuditContext) -> list[Finding]:
    """Every host check, then the GPU checks when NVML is available; ordered by :func:`ordered`."""
    found = [run_check(cid, fn, ctx) for cid, fn in HOST_CHECKS]
    if ctx.nvml is None:
        found.append(Finding(Grade.SKIP, ctx.nvml_reason or "no NVML", "-", "nvmlInit", check="gpu.nvml"))
        return ordered(found)
    found += [run_check(cid, fn, ctx) for cid, fn in checks_gpu.SYSTEM_CHECKS]
    for i in range(ctx.nvml.device_count()):
        found += [run_check(f"gpu{i}.{cid}", fn, ctx, i) for cid, fn in GPU_CHECKS]
    return ordered(found)


def ordered(findings: list[Finding]) -> list[Finding]:
    """Hardware faults first, then FAIL, WARN, UNKNOWN, SKIP, PASS; stable within a grade."""
    def rank(f: Finding) -> int:
        return 0 if f.hardware and f.grade in (Grade.FAIL, Grade.WARN) else _RANK[f.grade]
    return sorted(findings, key=rank)


def exit_code(findings: list[Finding], strict: bool = False) -> int:
    """See :data:`EXIT_CODES_HELP`."""
    if any(f.hardware and f.grade is Grade.FAIL for f in findings):
        return EXIT_HARDWARE
    bad = {Grade.FAIL, Grade.UNKNOWN} if strict else {Grade.FAIL}
    return EXIT_FAIL if any(f.grade in bad for f in findings) else EXIT_OK


def to_json(findings: list[Finding], ctx: AuditContext, strict: bool = False) -> dict[str, Any]:
    """The audit as a JSON-ready dict (schema in :data:`AUDIT_SCHEMA`)."""
    counts = Counter(f.grade.value for f in findings)
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": "aisp system audit",
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": {"hostname": platform.node(), "kernel": platform.release(), "machine": platform.machine()},
        "profile": ctx.profile,
        "root": str(ctx.root),
        "summary": {"counts": {g.value: counts.get(g.value, 0) for g in Grade},
                    "hardware_faults": sum(f.hardware and f.grade is Grade.FAIL for f in findings),
                    "exit_code": exit_code(findings, strict)},
        "findings": [f.to_dict() for f in findings],
    }


_FINDING_SCHEMA = {
    "type": "object",
    "required": ["check", "grade", "observed", "recommended", "source", "fix", "needs_root", "hardware", "note"],
    "additionalProperties": False,
    "properties": {
        "check": {"type": "string", "minLength": 1}, "grade": {"enum": [g.value for g in Grade]},
        "observed": {"type": "string"}, "recommended": {"type": "string"}, "source": {"type": "string"},
        "fix": {"type": "string"}, "needs_root": {"type": "boolean"}, "hardware": {"type": "boolean"},
        "note": {"type": "string"},
    },
}
AUDIT_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["schema_version", "tool", "created", "host", "profile", "root", "summary", "findings"],
    "properties": {
        "schema_version": {"const": SCHEMA_VERSION},
        "profile": {"enum": ["training", "inference"]},
        "summary": {"type": "object", "required": ["counts", "hardware_faults", "exit_code"],
                    "properties": {"exit_code": {"enum": [EXIT_OK, EXIT_FAIL, EXIT_HARDWARE]}}},
        "findings": {"type": "array", "items": _FINDING_SCHEMA},
    },
}
"""JSON Schema of :func:`to_json`'s output, for consumers and the tests."""
