"""``aisp report``: reports of a run folder (roofline PNG, self-contained HTML, ceilings, phases) and
the merge of a sharded run's folders."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from aisp.report import phases as phase_report
from aisp.report import plotting
from aisp.report.roofline import UnknownName, pair_points, plot

app = typer.Typer(help="Reports of a run folder (roofline plot, HTML report, ceilings, phases), merge of shards, and a dashboard across runs.",
                  no_args_is_help=True)

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
    from aisp.peak.measure import load_peaks
    from aisp.report.html_report import load_run

    _require_plotting()
    summary, _ = load_run(run_dir)
    peaks = load_peaks(summary["hardware_key"])
    if peaks is None:
        raise _fail(f"No measured peaks for '{summary['hardware_key']}'; run 'aisp peak' on that machine.", 2)
    try:
        points = pair_points(summary.get("results", []), peaks)
    except UnknownName as exc:  # a stored workload names a link or a precision no peak prices
        raise _fail(f"error: {exc}", 2) from exc
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
    from aisp.report.html_report import write_html

    _require_plotting()
    typer.echo(f"Wrote {write_html(run_dir, output)}")


@app.command(name="ceilings")
def ceilings_report(run_dir: Annotated[Path | None, typer.Argument(
        exists=True, file_okay=False, help="A run folder (artifacts/<timestamp>); or none with --stored.")] = None,
        current_notes: Annotated[bool, typer.Option(
            "--current-notes", help="Reasons as the pairs' files give them now, not as the run stored them.")] = False,
        current_workloads: Annotated[bool, typer.Option(
            "--current-workloads", help="Also FLOPs, bytes, links and latency counts as the files declare them now, "
                                        "against the times the run measured (implies --current-notes).")] = False,
        stored: Annotated[str | None, typer.Option(
            "--stored", metavar="KEY", help="Instead of a run: each pair's stored best time in its expectation "
                                            "files for this hardware key (h200), against its ceiling as declared "
                                            "now. A projection, not a measurement.")] = None,
        ) -> None:
    """Every pair's ceiling (compute, memory, latency or capacity), the % its best variant reaches and,
    below 80%, the reason its workload gives (``ceiling_note``). Exit 2 where the run has no summary,
    neither or both of RUN_DIR and --stored are given, or a pair's workload names an unknown link."""
    from aisp.report import ceilings

    if (run_dir is None) == (stored is None):
        raise _fail("error: give a run folder or --stored KEY (one of them).", 2)
    cache: dict[str, Any] = {}
    if stored is not None:
        from aisp.harness.discovery import repo_root
        from aisp.report.ceilings_stored import stored_results

        results, title = stored_results(repo_root(), stored), f"Ceilings of the stored {stored} expectations (projected)"
        if not results:
            raise _fail(f"error: no pair found to project for {stored}.", 2)

        def peaks_of(result: dict[str, Any]) -> dict[str, Any] | None:
            return _peaks_of_key(result["hardware_key"], cache)
    else:
        results, title, peaks_of = _run_results(run_dir, current_notes or current_workloads, current_workloads, cache)
    try:
        found = ceilings.rows(results, peaks_of)
    except ceilings.UnknownName as exc:  # a stored workload names a link or a precision no peak prices
        raise _fail(f"error: {exc}", 2) from exc
    if missing := sorted(k for k, v in cache.items() if v is None):
        typer.echo(f"No measured peaks for {', '.join(missing)}: those pairs show the ceilings stored in the run.")
    console = Console()
    console.print(ceilings.table(found, title, console.width))
    t = ceilings.tally(found)
    failed = f", {t['below_failed']} whose optimized variants failed in this run" if t["below_failed"] else ""
    typer.echo(f"{t['pairs']} pairs: {t['reached']} at >= {ceilings.REACHED_PCT:.0f}% of their ceiling, "
               f"{t['below']} below ({t['below_without_reason']} without a reason, {t['below_unprofiled']} whose reason "
               f"cites no profile{failed}), {t['no_ceiling']} without a ceiling, {t['untimed']} not timed in this run")
    typer.echo("By % reached: " + ", ".join(f"{n} at {label}" for label, n in ceilings.bands(found)))


def _peaks_of_key(key: str, cache: dict[str, Any], host: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The measured peaks of hardware ``key``, loaded once into ``cache`` (None where there are none),
    with ``host`` (a run's own host figures) in place of the cached host ones."""
    from aisp.peak.measure import load_peaks, with_host

    if key not in cache:
        cache[key] = with_host(load_peaks(key), host)
    return cache[key]


def _run_results(run_dir: Path, notes: bool, workloads: bool, cache: dict[str, Any]) -> tuple[list[dict[str, Any]], str, Any]:
    """A run's results (with today's notes or workloads), the table's title and the peaks of each pair."""
    from aisp.harness.artifacts import read_json
    from aisp.judge.expectations import gpu_key
    from aisp.peak.measure import run_host_peaks
    from aisp.report import ceilings
    from aisp.report.html_report import load_run

    if not (run_dir / "summary.json").exists():
        raise _fail(f"error: {run_dir} has no summary.json; pass a run folder (artifacts/<timestamp>).", 2)
    summary, _ = load_run(run_dir)
    manifest = read_json(run_dir / "manifest.json") if (run_dir / "manifest.json").exists() else summary

    host = run_host_peaks(run_dir)  # the run's own host figures (bench run --host-peaks)

    def peaks_of(result: dict[str, Any]) -> dict[str, Any] | None:
        """The peaks of the GPUs the pair uses (h200 for a one-GPU pair of a 4 x H200 run), with the
        run's own host figures where it measured them."""
        return _peaks_of_key(gpu_key(result, manifest), cache, host)
    results = summary.get("results", [])
    if notes:
        from aisp.harness.discovery import repo_root

        results = ceilings.with_current_notes(results, repo_root(), workloads=workloads)
    return results, f"Ceilings of {run_dir.name} ({summary['hardware_key']})", peaks_of


@app.command()
def phases(
    run_dir: RunDir,
    pairs: Annotated[bool, typer.Option("--pairs", help="One row per pair instead of per chapter.")] = False,
    markdown: Annotated[Path | None, typer.Option("--markdown", "-o", help="Also write the table here.")] = None,
) -> None:
    """Where the run's time went: seconds per phase for each chapter (or pair), and the harness's fixed
    cost per pair (process start and imports, time in no phase, process exit)."""
    from aisp.report.html_report import load_run

    try:
        summary, _ = load_run(run_dir)
    except (FileNotFoundError, ValueError) as exc:
        raise _fail(f"error: {exc}", 2) from None
    rows = phase_report.by_group(summary.get("results", []), per_pair=pairs)
    if not rows:
        raise _fail("No pair in this run.", 1)
    console = Console()
    console.print(phase_report.table(rows, "pair" if pairs else "chapter", f"Phases of {run_dir.name} (s)",
                                     console.width))
    if markdown is not None:
        markdown.write_text(phase_report.markdown(rows))
        typer.echo(f"Wrote {markdown}")


@app.command()
def merge(
    run_dirs: Annotated[list[Path], typer.Argument(exists=True, file_okay=False, help="The shards' run folders.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="The merged run folder (new or empty).")],
) -> None:
    """One run folder from the run folders of a --shard run: every pair, each shard's host in the
    manifest, the summary written again. Exit code: the merged run's worst verdict (as 'aisp bench
    run'); 5 when a shard of the run is missing; 2 when the folders cannot be merged (different
    results for one pair, different hardware, not a run folder)."""
    from aisp.harness.results import exit_code
    from aisp.report.merge import MergeError
    from aisp.report.merge import merge as merge_runs

    try:
        results, manifest = merge_runs(run_dirs, output)
    except MergeError as exc:
        raise _fail(f"error: {exc}", 2) from None
    typer.echo(f"Merged {len(results)} pairs from {len(run_dirs)} run folders "
               f"({', '.join(manifest['hosts'])}) into {output}")
    code = exit_code(results)
    if manifest["missing_shards"]:
        typer.echo(f"error: shards missing: {', '.join(manifest['missing_shards'])}", err=True)
        code = max(code, 5)
    raise typer.Exit(code)


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


@app.command(name="expectations")
def expectations_report(
    chapter: Annotated[list[str] | None, typer.Option("--chapter", "-c", help="A chapter (ch13); repeat for more. Default: every chapter.")] = None,
    key: Annotated[list[str] | None, typer.Option("--key", "-k", help="A hardware key (h200, 2x_h200); repeat for more. Default: every key.")] = None,
    root: Annotated[Path | None, typer.Option(help="The folder holding the chapter folders (default: the repository).")] = None,
    markdown: Annotated[bool, typer.Option("--markdown", help="Print Markdown tables instead of console tables.")] = False,
    write_readmes: Annotated[bool, typer.Option("--write-readmes", help="Put each chapter's table in its README.md, between the aisp:expectations markers.")] = False,
) -> None:
    """Each chapter's stored expectations: per pair and hardware key, the latest run's best variant,
    baseline and optimized figures and speedup [95% CI], the runs in its history with the range and
    geometric mean of their speedups, their dates and commits. Exit 2: a root, chapter or key that
    names nothing, an unreadable expectations file, a README whose markers are broken, or --key with
    --write-readmes (a README quotes every key)."""
    from aisp.harness.discovery import repo_root
    from aisp.judge.expectations import Unreadable, load
    from aisp.report import expectations_table as et

    if write_readmes and key:
        raise _fail("error: --write-readmes quotes every key in a README; leave out --key", 2)
    try:
        files = et.chapter_files(root or repo_root(), chapter or (), key or ())
        stored = {name: {path: load(path)["entries"] for path in paths} for name, paths in files.items()}
        rows = {name: et.chapter_rows(entries) for name, entries in stored.items()}
        if write_readmes:
            for line in et.write_readmes(stored, rows):
                typer.echo(line)
            return
    except (et.SelectionError, Unreadable, OSError) as exc:
        raise _fail(f"error: {exc}", 2) from None
    _print_expectations(rows, markdown)


def _print_expectations(rows: dict[str, list[Any]], markdown: bool) -> None:
    """One table per chapter (Markdown with a heading each, or fitted to the console), then a tally."""
    from aisp.report import expectations_table as et

    console = Console()
    for name, found in rows.items():
        if markdown:
            typer.echo(f"## {name}\n\n{et.markdown(found) if found else '(no stored expectations)'}")
        elif found:
            console.print(et.table(found, f"{name}: stored expectations", console.width))
        else:
            typer.echo(f"{name}: no stored expectations")
    entries = [r for found in rows.values() for r in found]
    few = sum(r.runs < et.FEW_RUNS for r in entries)
    typer.echo(f"{len(entries)} entries in {sum(bool(f) for f in rows.values())} chapters; "
               f"{few} with fewer than {et.FEW_RUNS} runs")
