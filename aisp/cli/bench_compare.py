"""``aisp bench compare RUN_A RUN_B``: each pair of run B against run A, with significance."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from aisp.cli.bench import app
from aisp.judge.compare_runs import any_slower, compare_runs, run_to_run_threshold

EXIT_SLOWER = 3
COMPARE_EXIT_HELP = ("Exit codes: 0 no pair is slower; 2 a run folder is missing, a JSON file is malformed "
                     "or the threshold is out of range; 3 some pair of RUN_B is significantly slower than "
                     "in RUN_A (also when the environment changed: the rows say so).")
STATUS_STYLE = {"faster": "green", "same": "dim", "slower": "red", "ambiguous": "yellow",
                "added": "cyan", "removed": "cyan", "not-compared": "dim"}


def _ms(value: float | None) -> str:
    return f"{value:.4g}" if value is not None else "-"


def _ratio(row: dict[str, Any]) -> str:
    ratio = row.get("ratio")
    if not ratio:
        return "-"
    return f"{ratio['value']:.3f} [{ratio['low']:.3f}, {ratio['high']:.3f}] ({row['change']:+.1%})"


def _styled(status: str) -> str:
    style = STATUS_STYLE.get(status, "")
    return f"[{style}]{status}[/{style}]" if style else status


def comparison_table(comparison: dict[str, Any]) -> Table:
    """pair (status) | variant | A ms | B ms | time B/A [95% CI] | threshold | p | status | note."""
    fixed = comparison["threshold"]
    table = Table(title=f"{comparison['run_b']} vs {comparison['run_a']} (threshold "
                        + (f"{fixed:.0%})" if fixed else "per variant: its run-to-run noise)"))
    for column in ("pair", "variant", "A ms", "B ms", "time B/A [95% CI]", "threshold", "p", "status", "note"):
        table.add_column(column, overflow="fold")
    for pair in comparison["pairs"]:
        env = "environment changed" if pair["environment_changed"] else ""
        for i, row in enumerate(pair["variants"]):
            label = f"{pair['target']} ({_styled(pair['status'])})" if i == 0 else ""
            p_value = f"{row['p_value']:.2g}" if "p_value" in row else "-"
            note = escape("; ".join(filter(None, [env, row.get("reason")])))
            table.add_row(label, row["variant"], _ms(row["a_ms"]), _ms(row["b_ms"]), _ratio(row),
                          f"{row['threshold']:.1%}", p_value, _styled(row["status"]), note)
    return table


def _counts(comparison: dict[str, Any]) -> str:
    counts: dict[str, int] = {}
    for pair in comparison["pairs"]:
        counts[pair["status"]] = counts.get(pair["status"], 0) + 1
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no pairs"


@app.command("compare", epilog=COMPARE_EXIT_HELP)
def compare(
    run_a: Annotated[Path, typer.Argument(help="The reference run folder (artifacts/<timestamp>).")],
    run_b: Annotated[Path, typer.Argument(help="The run folder compared with it.")],
    threshold: Annotated[float | None, typer.Option(
        help="Relative change in median time that counts. Default: each variant's run-to-run noise from "
             f"the stored expectations' history, else {run_to_run_threshold([]):.0%}.")] = None,
) -> None:
    """Per pair and variant: faster, slower, same or ambiguous (interval, Mann-Whitney U, run-to-run threshold)."""
    console = Console()
    try:
        comparison = compare_runs(run_a, run_b, threshold)
    except (FileNotFoundError, ValueError) as exc:
        Console(stderr=True).print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from exc
    if comparison["environment_changes"]:
        console.print("[bold yellow]environment changed:[/bold yellow] "
                      + escape("; ".join(comparison["environment_changes"])))
    console.print(comparison_table(comparison))
    console.print(f"Pairs: {_counts(comparison)}")
    raise typer.Exit(EXIT_SLOWER if any_slower(comparison) else 0)
