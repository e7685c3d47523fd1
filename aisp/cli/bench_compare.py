"""``aisp bench compare RUN_A RUN_B``: each pair of run B against run A, with significance; a table,
``--json`` or ``--csv`` on stdout."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from aisp.cli.bench import app, fail_usage

EXIT_SLOWER = 3
DEFAULT_THRESHOLD = 0.176
"""The run-to-run threshold without stored history (``run_to_run_threshold([])``, 17.6%; a test keeps
them equal), written here so that ``aisp --help`` does not import scipy."""
COMPARE_EXIT_HELP = ("Exit codes: 0 no optimized variant nor headline got worse (a baseline alone getting "
                     "slower is reported, not failed); 2 a run folder is missing, a JSON file is malformed, "
                     "the threshold is out of range or --json and --csv are both given; 3 some pair of RUN_B "
                     "got worse than in RUN_A: an optimized variant significantly slower, or its headline "
                     "(speedup or memory ratio) lower by more than the threshold (also when the environment "
                     "changed: the rows say so; not for a host-bound variant or its pair's headline where the runs' hosts "
                     "differ in speed).")
STATUS_STYLE = {"faster": "green", "same": "dim", "slower": "red", "ambiguous": "yellow",
                "not in run A": "cyan", "not in run B": "cyan", "not-compared": "dim"}


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


def _headline(pair: dict[str, Any]) -> str:
    a, b = pair["speedup_a"], pair["speedup_b"]
    if not (a and b):
        return ""
    return f"headline {a['value']:.2f}x -> {b['value']:.2f}x" + (" (worse)" if pair["headline_worse"] else "")


def comparison_table(comparison: dict[str, Any], width: int = 150) -> Any:
    """pair | variant | A ms | B ms | time B/A [95% CI] | threshold | p | status | note, fitted to
    ``width``: optional columns dropped, names never split, only the note wraps."""
    from aisp.report.console import Column, fitted_table

    fixed = comparison["threshold"]
    columns = [Column("pair"), Column("variant"), Column("A ms", drop_rank=2), Column("B ms", drop_rank=3),
               Column("time B/A [95% CI]"), Column("threshold", drop_rank=0), Column("p", drop_rank=1),
               Column("status"), Column("note", wraps=True)]
    rows = []
    for pair in comparison["pairs"]:
        env = "environment changed" if pair["environment_changed"] else ""
        for i, row in enumerate(pair["variants"]):
            label = f"{pair['target']} ({_styled(pair['status'])})" if i == 0 else ""
            p_value = f"{row['p_value']:.2g}" if "p_value" in row else "-"
            headline = _headline(pair) if i == 0 else ""
            note = escape("; ".join(filter(None, [env, headline, row.get("reason")])))
            variant = row["variant"] + (" (baseline)" if row["role"] == "baseline" else "")
            rows.append([label, escape(variant), _ms(row["a_ms"]), _ms(row["b_ms"]), _ratio(row),
                         f"{row['threshold']:.1%}", p_value, _styled(row["status"]), note])
    title = (f"{comparison['run_b']} vs {comparison['run_a']} (threshold "
             + (f"{fixed:.1%})" if fixed else "per variant: its run-to-run noise)"))
    return fitted_table(columns, rows, width, title=title)


def _counts(comparison: dict[str, Any]) -> str:
    counts: dict[str, int] = {}
    for pair in comparison["pairs"]:
        counts[pair["status"]] = counts.get(pair["status"], 0) + 1
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no pairs"


def _write_csv(comparison: dict[str, Any]) -> None:
    from aisp.judge.compare_runs import CSV_COLUMNS, csv_rows

    writer = csv.DictWriter(sys.stdout, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(csv_rows(comparison))


@app.command("compare", epilog=COMPARE_EXIT_HELP)
def compare(
    run_a: Annotated[Path, typer.Argument(help="The reference run folder (artifacts/<timestamp>).")],
    run_b: Annotated[Path, typer.Argument(help="The run folder compared with it.")],
    threshold: Annotated[float | None, typer.Option(
        metavar="FRACTION",
        help="Relative change in median time that counts (0.05 = 5%). Default: each variant's run-to-run "
             f"noise from the stored expectations' history, else {DEFAULT_THRESHOLD:.1%}.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON instead of a table.")] = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="Print one CSV row per pair and variant instead of a table "
                                                       "(numbers as numbers, empty where missing).")] = False,
) -> None:
    """Per pair and variant: faster, slower, same or ambiguous (interval, Mann-Whitney U, run-to-run threshold)."""
    from aisp.judge.compare_runs import any_slower, compare_runs

    if as_json and as_csv:
        fail_usage("--json and --csv: choose one")
    try:
        comparison = compare_runs(run_a, run_b, threshold)
    except (FileNotFoundError, ValueError) as exc:
        fail_usage(str(exc))
    code = EXIT_SLOWER if any_slower(comparison) else 0
    if as_json:
        typer.echo(json.dumps(comparison, indent=2))
        raise typer.Exit(code)
    if as_csv:
        _write_csv(comparison)
        raise typer.Exit(code)
    console = Console()
    if comparison["environment_changes"]:
        console.print("[bold yellow]environment changed:[/bold yellow] "
                      + escape("; ".join(comparison["environment_changes"])), soft_wrap=True)
    console.print(comparison_table(comparison, console.width))
    console.print(f"Pairs: {_counts(comparison)}", soft_wrap=True)
    raise typer.Exit(code)
