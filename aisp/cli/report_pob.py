"""``aisp report proof-of-benefit``: each pair's newest result under an artifacts folder, with a status."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from aisp.cli.report import app
from aisp.harness.options import RunOptions
from aisp.judge.proof import DEFAULT_MIN_SPEEDUP, proof_rows, tally, write_report
from aisp.report.console import Column, fitted_table

STATUS_STYLE = {"ok": "green", "ok-unchecked": "magenta", "inconclusive": "cyan", "needs-work": "yellow",
                "regressed": "red", "verify-failed": "bold red", "error": "bold red", "skipped": "dim"}


CONSOLE_COLUMNS = (Column("target"), Column("hardware", drop_rank=3), Column("status"),
                   Column("speedup [95% CI]"), Column("headline", drop_rank=1), Column("baseline ms", drop_rank=2),
                   Column("optimized ms", drop_rank=4), Column("best", drop_rank=0), Column("run", drop_rank=5),
                   Column("reason", wraps=True))
"""The console's columns (the CSV and Markdown keep every one, notes included): optional ones go,
lowest rank first, when the terminal is narrow; only the reason wraps."""


def _speedup(row: dict[str, str]) -> str:
    return f"{row['speedup']}x [{row['low']}, {row['high']}]" if row["speedup"] else "-"


def proof_table(rows: list[dict[str, str]], min_speedup: float, width: int = 150) -> Table:
    """The report's rows as a rich table fitted to ``width``, status coloured; a pair's notes are
    counted in its reason (they are in full in the CSV and Markdown)."""
    cells = []
    for row in rows:
        style = STATUS_STYLE[row["status"]]
        notes = len(row["notes"].split("; ")) if row["notes"] else 0
        reason = "; ".join(filter(None, [row["reason"], f"{notes} note(s) in the CSV" if notes else ""]))
        cells.append([escape(row["target"]), row["hardware"], f"[{style}]{row['status']}[/{style}]", _speedup(row),
                      row["headline"], row["baseline_ms"] or "-", row["optimized_ms"] or "-", escape(row["best"]),
                      row["run_id"], escape(reason)])
    return fitted_table(CONSOLE_COLUMNS, cells, width, title=f"Proof of benefit (bar {min_speedup:.2f}x)")


@app.command("proof-of-benefit")
def proof_of_benefit(
    artifacts_dir: Annotated[Path, typer.Option(help="Folder of run folders to scan.")] = RunOptions.artifacts_dir,
    output_csv: Annotated[Path, typer.Option(help="CSV path; the Markdown goes beside it (.md).")] = Path(
        "reports/proof_of_benefit.csv"),
    min_speedup: Annotated[float, typer.Option(help="Speedup (or memory ratio) a pair needs to be ok.")] = DEFAULT_MIN_SPEEDUP,
) -> None:
    """Status per pair (ok, needs-work, regressed, verify-failed, error, skipped) from its newest run.

    Exit codes: 0 report written; 2 the artifacts folder does not exist.
    """
    console = Console()
    try:
        rows, problems = proof_rows(artifacts_dir, min_speedup)
    except FileNotFoundError as exc:
        Console(stderr=True).print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from exc
    for problem in problems:
        console.print(f"[yellow]skipped unreadable run:[/yellow] {escape(problem)}")
    csv_path, md_path = write_report(rows, output_csv, artifacts_dir, min_speedup)
    console.print(proof_table(rows, min_speedup, console.width))
    console.print(f"{tally(rows)}\nWrote {csv_path} and {md_path}")
