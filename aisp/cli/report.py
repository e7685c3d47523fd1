"""``aisp report``: reports of a run folder (roofline PNG, self-contained HTML)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from aisp.peak.measure import load_peaks
from aisp.report import plotting
from aisp.report.html_report import load_run, write_html
from aisp.report.roofline import pair_points, plot

app = typer.Typer(help="Reports of a run folder (roofline plot, HTML report) and a dashboard across runs.", no_args_is_help=True)

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


@app.command()
def dashboard(
    artifacts_dir: Annotated[Path, typer.Argument(exists=True, file_okay=False,
                                                  help="An artifacts folder holding run folders (or one run folder).")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Folder of the site (created).")] = Path("site"),
) -> None:
    """A static site across runs: overview, chapter and pair pages with interactive charts (works offline)."""
    from aisp.harness.discovery import repo_root
    from aisp.report.dashboard import INSTALL_HINT, build_site, plotly_js

    if plotly_js() is None:
        raise _fail(f"error: {INSTALL_HINT}", 2)
    try:
        site = build_site(artifacts_dir, output, repo_root())
    except (ValueError, OSError) as exc:
        raise _fail(f"error: {exc}", 2) from None
    typer.echo(f"Wrote {site.index} ({site.pages} pages, {site.runs} runs, {site.pairs} pairs)")
