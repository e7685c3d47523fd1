"""Rich tables for audit findings, tune plans and tune outcomes."""

from __future__ import annotations

from rich.table import Table

from aisp.system.model import Finding, Grade
from aisp.system.tune import Outcome, Step

GRADE_STYLE = {Grade.PASS: "green", Grade.WARN: "yellow", Grade.FAIL: "bold red", Grade.SKIP: "dim",
               Grade.UNKNOWN: "magenta"}


def findings_table(findings: list[Finding], title: str) -> Table:
    table = Table(title=title, show_lines=False)
    for col in ("check", "grade", "observed", "recommended", "fix (root?)"):
        table.add_column(col, overflow="fold")
    for f in findings:
        grade = f"[{GRADE_STYLE[f.grade]}]{f.grade.value}{' HW' if f.hardware else ''}[/]"
        fix = f"{f.fix}{' (root)' if f.fix and f.needs_root else ''}"
        observed = f"{f.observed}\n[dim]{f.note}[/]" if f.note else f.observed
        table.add_row(f.check, grade, observed, f.recommended, fix)
    return table


def plan_table(steps: list[Step], title: str) -> Table:
    table = Table(title=title)
    for col in ("knob", "path", "current", "target", "action", "persists?"):
        table.add_column(col, overflow="fold")
    for s in steps:
        action = {"write": "[yellow]write (root)[/]", "ok": "[green]ok[/]"}.get(s.action, f"[dim]{s.action}[/]")
        persist = f"no: reboot reverts ({s.persist})" if s.action == "write" else ""
        table.add_row(s.check, s.path, str(s.current), s.target, action + (f"\n[dim]{s.note}[/]" if s.note else ""),
                      persist)
    return table


def outcome_table(outcomes: list[Outcome], title: str) -> Table:
    table = Table(title=title)
    for col in ("path", "wanted", "read back", "verified"):
        table.add_column(col, overflow="fold")
    for o in outcomes:
        table.add_row(o.path, o.wanted, str(o.observed), "[green]yes[/]" if o.ok else f"[red]no[/] {o.error}")
    return table
