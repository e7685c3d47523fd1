"""``aisp report``: reports of a run folder (roofline PNG, self-contained HTML, ceilings)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from aisp.peak.measure import load_peaks
from aisp.report import ceilings, plotting
from aisp.report.html_report import load_run, write_html
from aisp.report.roofline import pair_points, plot

app = typer.Typer(help="Reports of a run folder: roofline plot, HTML report.", no_args_is_help=True)

RunDir = Annotated[Path, typer.Argument(exists=True, file_okay=False, help="A run folder (artifacts/<timestamp>).")]


def _fail(message: str, code: int) -> typer.Exit:
    typer.echo(message, err=True)
    return typer.Exit(code)


def _require_plotting() -> None:
    """Exit 2 with the install hint where matplotlib (the ``plot`` extra) is missing."""
    if not plotting.available():
        raise _fail(f"error: {plotting.INSTALL_HINT}", 2)


@app.command()
def roofline(
    run_dir: RunDir,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="PNG path (default RUN_DIR/roofline.png).")] = None,
) -> None:
    """Plot each pair's baseline -> optimized move on this hardware key's measured roofline."""
    _require_plotting()
    summary, _ = load_run(run_dir)
    peaks = load_peaks(summary["hardware_key"])
    if peaks is None:
        raise _fail(f"No measured peaks for '{summary['hardware_key']}'; run 'aisp peak' on that machine.", 2)
    points = pair_points(summary.get("results", []), peaks)
    if not points:
        raise _fail("No pair in this run declares both FLOPs and bytes with both variants timed.", 1)
    path = plot(points, peaks, output or run_dir / "roofline.png")
    typer.echo(f"Wrote {path} ({len(points)} pairs)")


@app.command(name="html")
def html_report(
    run_dir: RunDir,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="HTML path (default RUN_DIR/report.html).")] = None,
) -> None:
    """One self-contained HTML file: summary table, speedup chart with intervals, roofline."""
    _require_plotting()
    typer.echo(f"Wrote {write_html(run_dir, output)}")


@app.command(name="ceilings")
def ceilings_report(run_dir: RunDir) -> None:
    """Every pair's ceiling (compute, memory or latency), the % its best variant reaches and, below
    80%, the reason its workload gives (``ceiling_note``). Exit 2 where the run has no summary."""
    if not (run_dir / "summary.json").exists():
        raise _fail(f"error: {run_dir} has no summary.json; pass a run folder (artifacts/<timestamp>).", 2)
    summary, _ = load_run(run_dir)
    peaks = load_peaks(summary["hardware_key"])
    if peaks is None:
        typer.echo(f"No measured peaks for '{summary['hardware_key']}': showing the ceilings stored in the run.")
    found = ceilings.rows(summary.get("results", []), peaks)
    Console(width=200).print(ceilings.table(found, f"Ceilings of {run_dir.name} ({summary['hardware_key']})"))
    t = ceilings.tally(found)
    typer.echo(f"{t['pairs']} pairs: {t['reached']} at >= {ceilings.REACHED_PCT:.0f}% of their ceiling, "
               f"{t['below']} below ({t['below_without_reason']} without a reason), {t['no_ceiling']} without a ceiling")
