"""``aisp bench``: list targets, verify pairs, run pairs.

Only the commands that run pairs import torch (through :mod:`aisp.suite`), inside the command:
``aisp --help`` and ``aisp bench --help`` stay light.
"""

from __future__ import annotations

import json
import sys
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from aisp.harness.discovery import Pair, TargetError, all_pairs, normalize_chapter, repo_root, resolve_targets
from aisp.harness.options import Device, ProfileLevel, RunOptions, Timing
from aisp.harness.resume import ResumeError
from aisp.harness.scheduler import PlacementError

if TYPE_CHECKING:
    from aisp.report.step_summary import CiOutputs

app = typer.Typer(help="Run, verify and list baseline/optimized benchmark pairs.", no_args_is_help=True)

Targets = Annotated[list[str] | None, typer.Option("--targets", "-t", metavar="TARGET",
                                                   help="ch01, ch1, ch01:name (repeatable).")]
Roots = Annotated[list[Path] | None, typer.Option("--root", metavar="DIR", help="A folder of your own pairs (repeatable).")]
Gpus = Annotated[str, typer.Option(metavar="all|N|I,J,...",
                                   help="GPUs of this node used together: all, a count (4) or ordinals (0,2,3); "
                                        "each pair on its own GPU(s), several at once. 1: one pair at a time.")]
Shard = Annotated[str | None, typer.Option(metavar="I/N", help="Only this machine's part of the pairs (a Slurm "
                                                               "array task or Kubernetes index); 'aisp report merge' joins the parts.")]
DeviceOpt = Annotated[Device, typer.Option(help="Where pairs run: CUDA when present (auto), or forced.")]
ReuseWorkers = Annotated[bool, typer.Option(
    help="One long-lived worker per GPU runs its pairs in turn (state put back between pairs) instead of a "
         "fresh process per pair: faster, less isolated.")]
ForkWorkers = Annotated[bool, typer.Option(
    help="Fork each pair's fresh worker from one process that has imported torch and the harness, instead "
         "of starting Python anew: a new process per pair without each one's start.")]
ArtifactsDir = Annotated[Path, typer.Option(metavar="DIR", help="Where run folders go.")]

EXIT_CODES_HELP = ("Exit codes: 0 all ok, inconclusive (speedup interval holds 1), ok-unchecked (baseline "
                   "declares no per-call inputs) or skipped; 1 an optimized variant is significantly slower; "
                   "2 bad usage (unknown target, bad option, no pair to run, unreadable expectations file, "
                   "no --targets when stdin is not a terminal and --yes is not given, a --resume RUN_DIR that cannot be "
                   "continued); "
                   "3 regressed against expectations; 4 verification failed; 5 error or timeout (a baseline "
                   "without its optimized file, or the reverse, is an error); 130/143 interrupted by "
                   "SIGINT/SIGTERM. The worst verdict wins.")
RUN_HELP = ("Verify, then time each pair; write artifacts; exit with the worst verdict's code.\n\n"
            "Without --targets (nor --root or --shard) it prints the plan (pairs, chapters, estimated time from the expectation "
            "files' stored durations) and asks before running every pair; --yes skips the question. "
            "Declining runs nothing (exit 0).\n\n"
            "--resume RUN_DIR continues a run cut short (its --suite-timeout, Ctrl-C, a killed job): into the same folder it "
            "runs only the run's pairs without a final result there (never started, or stopped by the suite's time limit or "
            "an interrupt), then writes one summary of every pair, old and new, and exits with the code of all of them. "
            "A pair that ended with any verdict of its own (ok, slower, error, verify-failed, its own timeout, skipped...) "
            "is not run again: running failures again until they pass would bias the verdict. The run's selection and "
            "options are used; -t/--root and options given must equal the run's (exit 2 otherwise), except "
            "--suite-timeout, --gpus, --fork-workers/--reuse-workers, --confirm-runs and --update-expectations, which "
            "may differ. A run recorded at another commit or working tree is refused (exit 2) unless --force-resume "
            "(recorded in the run's parts). A resumed run cut short can be resumed again.")


def fail_usage(message: str) -> NoReturn:
    """Bad usage: one line on stderr, exit 2 (the style of every aisp usage error)."""
    typer.secho(f"error: {message}", err=True, fg="red")
    raise typer.Exit(2)


def is_terminal() -> bool:
    """Whether a person can answer a question (stdin and stdout are terminals)."""
    return sys.stdin.isatty() and sys.stdout.isatty()


@app.command("list-targets")
def list_targets(chapter: Annotated[str | None, typer.Option(metavar="CHAPTER", help="Only this chapter (ch03).")] = None,
                 root: Roots = None,
                 as_json: Annotated[bool, typer.Option("--json", help="Print the list as JSON.")] = False,
                 check_here: Annotated[bool, typer.Option(
                     "--runs-here/--no-runs-here",
                     help="Import each pair to tell whether this machine meets its requirements (CUDA, GPUs, "
                          "packages); slower, imports torch.")] = True) -> None:
    """List every pair (target, optimized variants, whether it runs here), with counts per chapter."""
    from aisp.cli.targets import chapter_counts, target_rows

    try:
        pairs = all_pairs(repo_root(), tuple(root or ()))
    except TargetError as exc:
        fail_usage(str(exc))
    if chapter:
        pairs = [p for p in pairs if p.group == normalize_chapter(chapter)]
        if not pairs:
            fail_usage(f"no pairs in '{chapter}'")
    rows = target_rows(pairs, check_here)
    counts = chapter_counts(rows)
    here = sum(bool(r["runs_here"]) for r in rows)
    if as_json:
        typer.echo(json.dumps({"count": len(rows), "runs_here": here if check_here else None,
                               "chapters": counts, "pairs": rows}, indent=2))
        return
    _print_targets(rows, check_here)
    tail = f"; {here} run here" if check_here else ""
    typer.echo(f"{len(rows)} pairs in {len(counts)} chapter{'' if len(counts) == 1 else 's'}{tail}: "
               + ", ".join(f"{c} {n}" for c, n in counts.items()))


def _print_targets(rows: list[dict], check_here: bool) -> None:
    from aisp.report.console import Column, fitted_table

    console = Console()
    columns = [Column("target"), Column("optimized variants", wraps=True)]
    cells = [[escape(r["target"]), escape(r["problem"] or ", ".join(r["variants"]))] for r in rows]
    if check_here:
        columns.append(Column("runs here", wraps=True))
        for cell, row in zip(cells, rows, strict=True):
            cell.append("[green]yes[/green]" if row["runs_here"] else escape(f"no: {row['why_not']}"))
    console.print(fitted_table(columns, cells, console.width))


def _options(**kwargs) -> RunOptions:
    """The run's options, or exit 2 before any pair runs: a bad value, or --device cuda without a GPU."""
    try:
        options = RunOptions(**kwargs)
    except ValueError as exc:
        fail_usage(str(exc))
    if options.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            fail_usage("--device cuda: torch sees no CUDA GPU here (use --device auto or cpu)")
    return options


def plan_text(pairs: list[Pair], seconds: dict[str, float], default_s: float, parallel: int = 1) -> str:
    """The plan of a run of every pair: how many, in which chapters, and about how long from each
    pair's stored duration (``default_s`` for a pair with none), spread over ``parallel`` GPUs."""
    chapters: dict[str, int] = {}
    for pair in pairs:
        chapters[pair.group] = chapters.get(pair.group, 0) + 1
    total_s = sum(seconds.get(p.slug, default_s) for p in pairs) / max(parallel, 1)
    unknown = sum(p.slug not in seconds for p in pairs)
    lines = [f"Plan: {len(pairs)} pairs in {len(chapters)} chapters, about {_duration(total_s)}"
             + (f" on {parallel} GPUs at once" if parallel > 1 else "")
             + (f" ({unknown} pairs without a stored duration counted at {default_s:.0f} s each)" if unknown else ""),
             "  " + ", ".join(f"{c} {n}" for c, n in chapters.items())]
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 5400 else f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def gpus_at_once(gpus: str) -> int:
    """How many pairs ``--gpus`` runs at once (one per GPU): ``1``, a count, ordinals or ``all``."""
    if gpus == "all":
        import torch

        return max(torch.cuda.device_count(), 1)
    return len(gpus.split(",")) if "," in gpus else max(int(gpus), 1) if gpus.isdigit() else 1


def confirm_all(roots: tuple[Path, ...], options: RunOptions, yes: bool) -> bool:
    """Before a run without --targets: with --yes, go; on a terminal, print the plan and ask;
    elsewhere (CI, a pipe) exit 2, since nobody asked for every pair. False: the person declined."""
    if yes:
        return True
    if not is_terminal():
        fail_usage("no --targets and not on a terminal: name pairs with -t (ch05, ch05:name) or pass --yes "
                   "to run every pair")
    from aisp import suite
    from aisp.harness.scheduler import DEFAULT_SECONDS

    try:
        pairs = resolve_targets([], repo_root(), roots)
    except TargetError as exc:
        fail_usage(str(exc))
    hints = suite.pair_hints(pairs)
    seconds = {slug: h.seconds for slug, h in hints.items() if h.seconds != DEFAULT_SECONDS}
    typer.echo(plan_text(pairs, seconds, DEFAULT_SECONDS, gpus_at_once(options.gpus)))
    return typer.confirm(f"Run all {len(pairs)} pairs?", default=False)


@app.command(epilog=EXIT_CODES_HELP, help=RUN_HELP)
def run(
    ctx: typer.Context,
    targets: Targets = None,
    root: Roots = None,
    iterations: Annotated[int, typer.Option(help="Timed iterations per variant.")] = RunOptions.iterations,
    warmup: Annotated[int, typer.Option(help="Warmup iterations per variant (at least).")] = RunOptions.warmup,
    warmup_s: Annotated[float, typer.Option(metavar="SECONDS", help="Warm up for at least this many seconds too.")] = RunOptions.warmup_s,
    timing: Annotated[Timing, typer.Option(help="per-call (sync around each call), sustained (back to back) or graph (replays of one CUDA graph capture).")
                      ] = RunOptions.timing,
    artifacts_dir: ArtifactsDir = RunOptions.artifacts_dir,
    device: DeviceOpt = RunOptions.device,
    timeout_multiplier: Annotated[float, typer.Option(metavar="FACTOR", help="Scale each pair's timeout.")] = RunOptions.timeout_multiplier,
    suite_timeout: Annotated[float | None, typer.Option(metavar="SECONDS", help="Seconds for the whole suite.")] = RunOptions.suite_timeout,
    reproducible: Annotated[bool, typer.Option(help="Deterministic algorithms, fixed seeds.")] = RunOptions.reproducible,
    cold_start: Annotated[bool, typer.Option(help="Each variant timed in a fresh process.")] = RunOptions.cold_start,
    cold_runs: Annotated[int, typer.Option(help="With --cold-start: fresh processes per variant.")] = RunOptions.cold_runs,
    flush_l2: Annotated[bool, typer.Option(help="Flush the GPU L2 before each timed iteration.")] = RunOptions.flush_l2,
    profile: Annotated[ProfileLevel, typer.Option(help="none, minimal (torch.profiler) or full (+ Nsight).")] = RunOptions.profile,
    update_expectations: Annotated[bool, typer.Option(help="Rewrite expectations with this run.")] = RunOptions.update_expectations,
    seed: Annotated[int, typer.Option(help="Seed of the main pass.")] = RunOptions.seed,
    gpus: Gpus = RunOptions.gpus,
    shard: Shard = RunOptions.shard,
    confirm_runs: Annotated[int, typer.Option(metavar="N", help="Re-run a pair flagged regressed this many times; it stays "
                                                   "regressed only if the re-runs confirm (0: no re-run).")
                            ] = RunOptions.confirm_runs,
    reuse_workers: ReuseWorkers = RunOptions.reuse_workers,
    fork_workers: ForkWorkers = RunOptions.fork_workers,
    host_peaks: Annotated[bool, typer.Option(
        "--host-peaks", help="Measure this host's memory, page-cache, first-touch and torch-dispatch rates (~10 s) and "
                             "its launch and sync floors on the run's first GPU (a subprocess) first, and price "
                             "host-bound pairs at them, not at another host's cached figures.")] = RunOptions.host_peaks,
    junit_xml: Annotated[Path | None, typer.Option(metavar="PATH", help="Also write the results as JUnit XML here.")] = None,
    step_summary: Annotated[Path | None, typer.Option(
        metavar="PATH", help="Write a Markdown summary here (default: append to $GITHUB_STEP_SUMMARY when set).")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Without --targets, run every pair without asking.")] = False,
    resume: Annotated[Path | None, typer.Option(metavar="RUN_DIR", help="Continue this run folder: only its pairs "
                                                "without a final result run (see above).")] = None,
    force_resume: Annotated[bool, typer.Option("--force-resume", help="With --resume: continue a run recorded at another commit or "
                                                    "working tree (recorded).")] = False,
) -> None:
    from aisp.report.step_summary import CiOutputs

    options = _options(iterations=iterations, warmup=warmup, warmup_s=warmup_s, timing=timing,
                       artifacts_dir=artifacts_dir, device=device,
                       timeout_multiplier=timeout_multiplier, suite_timeout=suite_timeout,
                       reproducible=reproducible, cold_start=cold_start, cold_runs=cold_runs, flush_l2=flush_l2,
                       profile=profile, update_expectations=update_expectations, seed=seed, gpus=gpus, shard=shard,
                       confirm_runs=confirm_runs, reuse_workers=reuse_workers, fork_workers=fork_workers,
                       host_peaks=host_peaks)
    if force_resume and resume is None:
        fail_usage("--force-resume goes with --resume RUN_DIR")
    if resume is not None:
        raise typer.Exit(_resume(resume, targets, root, _given(ctx, options), force_resume,
                                 CiOutputs.from_cli(junit_xml, step_summary)))
    if not targets and not root and not shard and not confirm_all(tuple(root or ()), options, yes):
        typer.echo("Nothing run.")
        raise typer.Exit(0)
    raise typer.Exit(_run(targets, root, options, CiOutputs.from_cli(junit_xml, step_summary)))


@app.command(epilog=EXIT_CODES_HELP)
def verify(targets: Targets = None, root: Roots = None,
           device: DeviceOpt = RunOptions.device,
           artifacts_dir: ArtifactsDir = RunOptions.artifacts_dir,
           gpus: Gpus = RunOptions.gpus, shard: Shard = RunOptions.shard,
           reuse_workers: ReuseWorkers = RunOptions.reuse_workers,
           fork_workers: ForkWorkers = RunOptions.fork_workers,
           ) -> None:
    """Import every pair and check correctness (no timing)."""
    raise typer.Exit(_run(targets, root, _options(verify_only=True, device=device, artifacts_dir=artifacts_dir,
                                                  gpus=gpus, shard=shard, reuse_workers=reuse_workers,
                                                  fork_workers=fork_workers)))


def _run(targets: list[str] | None, root: list[Path] | None, options: RunOptions,
         ci: CiOutputs | None = None) -> int:
    from aisp import suite

    try:
        return suite.run(targets or [], tuple(root or ()), options, ci=ci)
    except (TargetError, PlacementError) as exc:
        fail_usage(str(exc))


def _given(ctx: typer.Context, options: RunOptions) -> dict[str, object]:
    """The run options set on the command line (not left at their default), by field name."""
    return {f.name: getattr(options, f.name) for f in fields(RunOptions)
            if getattr(ctx.get_parameter_source(f.name), "name", "DEFAULT") != "DEFAULT"}


def _resume(run_dir: Path, targets: list[str] | None, root: list[Path] | None, given: dict[str, object],
            force: bool, ci: CiOutputs) -> int:
    from aisp import suite

    try:
        return suite.resume(run_dir, targets or [], tuple(root or ()), given, force, ci=ci)
    except (TargetError, PlacementError, ResumeError) as exc:
        fail_usage(str(exc))


@app.command()
def noise(targets: Targets = None, root: Roots = None,
          iterations: Annotated[int, typer.Option(help="Timed iterations per variant.")] = RunOptions.iterations,
          device: DeviceOpt = RunOptions.device,
          artifacts_dir: ArtifactsDir = RunOptions.artifacts_dir,
          ) -> None:
    """A/A calibration: time each variant against itself and store the noise floor per pair."""
    from rich.table import Table

    from aisp.judge.expectations import Unreadable
    from aisp.judge.noise import calibrate

    options = _options(iterations=iterations, device=device, artifacts_dir=artifacts_dir)
    try:
        pairs = resolve_targets(targets or [], repo_root(), tuple(root or ()))
    except TargetError as exc:
        fail_usage(str(exc))
    try:
        rows = calibrate([p for p in pairs if not p.problem], options)
    except Unreadable as exc:
        fail_usage(str(exc))
    table = Table("target", "file", "A/A ratio [95% CI]", "verdict")
    for pair in (p for p in pairs if p.problem):
        table.add_row(pair.target, "-", pair.problem, "error")
    for row in rows:
        ratio = row.get("aa_ratio")
        shown = f"{ratio['value']:.3f} [{ratio['low']:.3f}, {ratio['high']:.3f}]" if ratio else row.get("reason", "")
        table.add_row(row["target"], row["file"], shown, row["verdict"])
    Console().print(table)


@app.command("store")
def store(
    run_dirs: Annotated[list[Path], typer.Argument(help="Finished run folders (a merged run of shards too).")],
    root: Roots = None,
) -> None:
    """Store finished runs in the expectation files, as --update-expectations would have.

    For a run taken in shards (run them without --update-expectations, join them with 'aisp report
    merge', then store the merged folder) or on another machine. Exit 2 for a folder that is not a
    finished run."""
    from aisp.suite import print_stored, store_run

    for run_dir in run_dirs:
        try:
            written, warnings = store_run(run_dir, tuple(root or ()))
        except (FileNotFoundError, NotADirectoryError, KeyError, ValueError) as exc:
            fail_usage(f"{run_dir}: not a finished run folder ({type(exc).__name__}: {exc})")
        print_stored(written, warnings)


@app.command("expectations")
def list_expectations(
    hardware: Annotated[str, typer.Option(metavar="KEY", help="Hardware key (h100, h200, 2x_h200, cpu).")],
    min_speedup: Annotated[float, typer.Option(metavar="RATIO", help="List entries below this speedup.")] = 1.05,
) -> None:
    """List stored expectations whose speedup is below the bar."""
    from rich.table import Table

    from aisp.judge.expectations import Unreadable, below_bar

    try:
        rows = below_bar(repo_root(), hardware, min_speedup)
    except Unreadable as exc:
        fail_usage(str(exc))
    table = Table("target", "speedup", "headline", "best", title=f"{hardware}: below {min_speedup:.2f}x")
    for row in rows:
        table.add_row(row["target"], f"{row['speedup']:.2f}x", row["headline"], row["best"] or "-")
    Console().print(table if rows else f"No {hardware} expectation is below {min_speedup:.2f}x.")
