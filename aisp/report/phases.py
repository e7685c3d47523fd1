"""Where a run's time went (``aisp report phases``): each chapter's seconds per phase, summed over
its pairs, and the harness's fixed cost per pair (process start and imports, the worker's time in
no phase, and process exit: what a pair costs beyond its own setup, verification and timing)."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table

from aisp.harness.phases import ORDER
from aisp.report.console import Column, fitted_table

FIXED = ("start", "other", "exit")
"""The phases no pair's code runs in."""
DROP_FIRST = ("profile", "teardown", "exit", "other", "memory", "import", "warmup", "pairs", "setup", "verify",
              "timed", "start")
"""On a narrow console, the columns dropped first to last; the name, total and fixed cost stay."""


def by_group(results: list[dict[str, Any]], per_pair: bool = False) -> list[dict[str, Any]]:
    """One row per chapter (per pair with ``per_pair``), then the total: pairs, each phase's seconds,
    ``total`` (the workers' wall seconds) and ``fixed_per_pair``. Pairs without phases (a worker
    that never wrote a result, an older run) are counted in ``no_phases``."""
    rows: dict[str, dict[str, Any]] = {}
    for result in results:
        name = result["target"] if per_pair else result["group"]
        for key in (name, "all"):
            row = rows.setdefault(key, {"name": key, "pairs": 0, "no_phases": 0})
            phases = result.get("phases") or {}
            row["pairs"] += 1
            row["no_phases"] += not phases
            for phase, seconds in phases.items():
                row[phase] = row.get(phase, 0.0) + seconds
    out = [rows[k] for k in sorted(k for k in rows if k != "all")] + ([rows["all"]] if rows else [])
    for row in out:
        timed = row["pairs"] - row["no_phases"]
        row["fixed_per_pair"] = sum(row.get(p, 0.0) for p in FIXED) / timed if timed else None
    return out


def columns(rows: list[dict[str, Any]]) -> list[str]:
    """The phases any row has, in the order they happen, then the total."""
    return [p for p in (*ORDER, "total") if any(p in r for r in rows)]


def table(rows: list[dict[str, Any]], first: str, title: str, width: int) -> Table | Group:
    """The rows as a console table fitted to ``width``: the least telling phases are left out first
    (teardown, exit, ...), never a name cut short (at 80 columns the 14 columns were unreadable)."""
    names = columns(rows)
    headers = [first, "pairs", *names, "fixed s/pair"]
    cols = [Column(h, drop_rank=DROP_FIRST.index(h) if h in DROP_FIRST else None) for h in headers]
    cells = [[row["name"], str(row["pairs"]), *(f"{row.get(n, 0.0):.1f}" for n in names),
              "-" if row["fixed_per_pair"] is None else f"{row['fixed_per_pair']:.2f}"] for row in rows]
    return fitted_table(cols, cells, width - 1, title=title)  # - 1: the left border


def markdown(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table, seconds to one decimal."""
    names = columns(rows)
    lines = ["| chapter | pairs | " + " | ".join(names) + " | fixed s/pair |", "|---" * (len(names) + 3) + "|"]
    for row in rows:
        fixed = row["fixed_per_pair"]
        lines.append(f"| {row['name']} | {row['pairs']} | " + " | ".join(f"{row.get(n, 0.0):.1f}" for n in names)
                     + f" | {'-' if fixed is None else f'{fixed:.2f}'} |")
    return "\n".join(lines) + "\n"
