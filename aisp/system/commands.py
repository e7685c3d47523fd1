"""The work behind ``aisp system audit|tune|manifest``: one function per command, options in a dataclass."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from aisp.system.audit import exit_code, run_audit, to_json
from aisp.system.manifests import rejected, validate_manifest
from aisp.system.model import AuditContext, Profile
from aisp.system.nvml import open_nvml
from aisp.system.render import findings_table, outcome_table, plan_table
from aisp.system.tune import apply_plan, default_state_path, make_plan, manual_steps, plan_to_json, rollback


@dataclass(frozen=True)
class AuditOptions:
    profile: Profile = "training"
    """Recommendations to grade against: training or inference."""
    root: Path = Path("/")
    """Root of the /proc and /sys tree to read (a fake tree in tests)."""
    data_path: Path | None = None
    """Dataset or checkpoint folder whose filesystem is checked."""
    json: bool = False
    strict: bool = False
    """UNKNOWN counts as FAIL for the exit code."""
    gpu: bool = True
    """Read GPUs through NVML."""
    torch: bool = True
    """Ask PyTorch for its effective CUDA allocator settings."""


@dataclass(frozen=True)
class TuneOptions:
    profile: Profile = "training"
    root: Path = Path("/")
    apply: bool = False
    state: Path | None = None
    """Where apply saves the previous values (default: <root>/var/lib/aisp/tune-<profile>-<time>.json)."""
    rollback: Path | None = None
    """A state file to restore instead of planning."""
    json: bool = False


def _context(profile: Profile, root: Path, gpu: bool, torch: bool, data_path: Path | None = None) -> AuditContext:
    nvml, reason = open_nvml() if gpu else (None, "GPU reads turned off (--no-gpu)")
    return AuditContext(root=root, profile=profile, nvml=nvml, nvml_reason=reason, data_path=data_path,
                        probe_torch=torch)


def audit_main(opts: AuditOptions, console: Console | None = None) -> int:
    """Run the audit, print it, return the exit code."""
    console = console or Console()
    ctx = _context(opts.profile, opts.root, opts.gpu, opts.torch, opts.data_path)
    findings = run_audit(ctx)
    code = exit_code(findings, opts.strict)
    if opts.json:
        sys.stdout.write(json.dumps(to_json(findings, ctx, opts.strict), indent=2) + "\n")
        return code
    console.print(findings_table(findings, f"aisp system audit - profile {opts.profile}, root {opts.root}"))
    hw = sum(f.hardware and f.grade.value == "FAIL" for f in findings)
    console.print(f"exit code {code}" + (f": {hw} hardware fault(s) - fix these before any tuning" if hw else ""))
    return code


def _is_root() -> bool:
    return os.geteuid() == 0


def _rollback(path: Path, console: Console) -> int:
    try:
        outcomes = rollback(path, _is_root())
    except PermissionError as err:
        console.print(f"[red]refused:[/] {err}")
        return 1
    if not outcomes:
        console.print("every recorded value is already in place: nothing written")
        return 0
    console.print(outcome_table(outcomes, f"rollback from {path}"))
    return 0 if all(o.ok for o in outcomes) else 1


def tune_main(opts: TuneOptions, console: Console | None = None) -> int:
    """Print the plan (and the manual steps); with ``apply`` write it; with ``rollback`` restore."""
    console = console or Console()
    if opts.rollback is not None:
        return _rollback(opts.rollback, console)
    plan = make_plan(opts.root, opts.profile)
    manual = manual_steps(run_audit(_context(opts.profile, opts.root, gpu=True, torch=False)))
    if opts.json:
        sys.stdout.write(json.dumps(plan_to_json(plan, manual), indent=2) + "\n")
    else:
        console.print(plan_table(plan, f"aisp system tune - profile {opts.profile}, root {opts.root}"))
        console.print(findings_table(manual, "manual steps (never run by tune: disruptive, reboot or reset)"))
    if not opts.apply:
        console.print("plan only: nothing was changed (--apply, as root, writes the 'write' rows)")
        return 0
    state = opts.state or default_state_path(opts.root, opts.profile)
    try:
        outcomes = apply_plan(plan, opts.root, opts.profile, state, _is_root())
    except PermissionError as err:
        console.print(f"[red]refused:[/] {err}")
        return 1
    if not outcomes:
        console.print("every knob already at its target: nothing written, no state file")
        return 0
    console.print(outcome_table(outcomes, "applied"))
    console.print(f"previous values saved in {state}; undo with: aisp system tune --rollback {state}")
    return 0 if all(o.ok for o in outcomes) and len(outcomes) == sum(s.action == "write" for s in plan) else 1


def manifest_main(paths: list[Path], console: Console | None = None) -> int:
    """Validate manifests offline; 1 when any has an error."""
    console = console or Console()
    bad = False
    for path in paths:
        try:
            problems = validate_manifest(path.read_text(), str(path))
        except RuntimeError as exc:
            console.print(f"[red]error:[/red] {exc}")
            return 2
        bad |= rejected(problems)
        verdict = "[red]rejected[/]" if rejected(problems) else "[green]accepted[/]"
        console.print(f"{path}: {verdict}")
        for p in problems:
            console.print(f"  {p.severity:7} {p.rule:24} {p.where}: {p.message}")
    return 1 if bad else 0
