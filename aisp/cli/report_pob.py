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
from aisp.judge.proof import COLUMNS, DEFAULT_MIN_SPEEDUP, proof_rows, tally, write_report

STATUS_STYLE = {"ok": "green", "ok-unchecked": "magenta", "inconclusive": "cyan", "needs-work": "yellow",
                "regressed": "red", "verify-failed": "bold red", "error": "bold red", "skipped": "dim"}


def proof_table(rows: list[dict[str, str]], min_speedup: float) -> Table:
    """The report's rows as a rich table, status coloured."""
    table = Table(title=f"Proof of benefit (bar {min_speedup:.2f}x)")
    for column in COLUMNS:
        table.add_column(column, overflow="fold")
    for row in rows:
        style = STATUS_STYLE[row["status"]]
        cells = [escape(row[c]) for c in COLUMNS]
        cells[COLUMNS.index("status")] = f"[{style}]{row['status']}[/{style}]"
        table.add_row(*cells)
    return table


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
    console.print(proof_table(rows, min_speedup))
    console.print(f"{tally(rows)}\nWrote {csv_path} and {md_path}")
