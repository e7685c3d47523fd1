"""``aisp bench``: list targets, verify pairs, run pairs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from aisp import suite
from aisp.harness.discovery import TargetError, all_pairs, normalize_chapter, repo_root, resolve_targets
from aisp.harness.options import RunOptions
from aisp.harness.scheduler import PlacementError
from aisp.report.step_summary import CiOutputs

app = typer.Typer(help="Run, verify and list baseline/optimized benchmark pairs.", no_args_is_help=True)

Targets = Annotated[list[str] | None, typer.Option("--targets", "-t", help="ch01, ch1, ch01:name (repeatable).")]
Roots = Annotated[list[Path] | None, typer.Option("--root", help="A folder of your own pairs (repeatable).")]
Gpus = Annotated[str, typer.Option(help="GPUs of this node used together: all, a count (4) or ordinals (0,2,3); "
                                        "each pair on its own GPU(s), several at once. 1: one pair at a time.")]
Shard = Annotated[str | None, typer.Option(help="I/N: only this machine's part of the pairs (a Slurm array task "
                                                "or Kubernetes index); 'aisp report merge' joins the parts.")]

EXIT_CODES_HELP = ("Exit codes: 0 all ok, inconclusive (speedup interval holds 1), ok-unchecked (baseline "
                   "declares no per-call inputs) or skipped; 1 an optimized variant is significantly slower; "
                   "2 bad usage (unknown target, bad option, no pair to run, unreadable expectations file); "
                   "3 regressed against expectations; 4 verification failed; 5 error or timeout (a baseline "
                   "without its optimized file, or the reverse, is an error); 130/143 interrupted by "
                   "SIGINT/SIGTERM. The worst verdict wins.")


def _fail_usage(message: str) -> NoReturn:
    """Bad usage: one line on stderr, exit 2."""
    typer.secho(f"error: {message}", err=True, fg="red")
    raise typer.Exit(2)


@app.command("list-targets")
def list_targets(chapter: Annotated[str | None, typer.Option(help="Only this chapter (ch03).")] = None,
                 root: Roots = None) -> None:
    """List every pair (target, optimized variants)."""
    try:
        pairs = all_pairs(repo_root(), tuple(root or ()))
    except TargetError as exc:
        _fail_usage(str(exc))
    if chapter:
        pairs = [p for p in pairs if p.group == normalize_chapter(chapter)]
        if not pairs:
            _fail_usage(f"no pairs in '{chapter}'")
    table = Table("target", "optimized variants")
    for pair in pairs:
        table.add_row(pair.target, pair.problem or ", ".join(p.stem for p in pair.optimized))
    Console().print(table)


def _options(**kwargs) -> RunOptions:
    """The run's options, or exit 2 before any pair runs: a bad value, or --device cuda without a GPU."""
    try:
        options = RunOptions(**kwargs)
    except ValueError as exc:
        _fail_usage(str(exc))
    if options.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            _fail_usage("--device cuda: torch sees no CUDA GPU here (use --device auto or cpu)")
    return options


@app.command(epilog=EXIT_CODES_HELP)
def run(
    targets: Targets = None,
    root: Roots = None,
    iterations: Annotated[int, typer.Option(help="Timed iterations per variant.")] = RunOptions.iterations,
    warmup: Annotated[int, typer.Option(help="Warmup iterations per variant (at least).")] = RunOptions.warmup,
    warmup_s: Annotated[float, typer.Option(help="Warm up for at least this many seconds too.")] = RunOptions.warmup_s,
    timing: Annotated[str, typer.Option(help="per-call (sync around each call), sustained (back to back) or graph (replays of one CUDA graph capture).")
                      ] = RunOptions.timing,
    artifacts_dir: Annotated[Path, typer.Option(help="Where run folders go.")] = RunOptions.artifacts_dir,
    device: Annotated[str, typer.Option(help="auto, cpu or cuda.")] = RunOptions.device,
    timeout_multiplier: Annotated[float, typer.Option(help="Scale each pair's timeout.")] = RunOptions.timeout_multiplier,
    suite_timeout: Annotated[float | None, typer.Option(help="Seconds for the whole suite.")] = RunOptions.suite_timeout,
    reproducible: Annotated[bool, typer.Option(help="Deterministic algorithms, fixed seeds.")] = RunOptions.reproducible,
    cold_start: Annotated[bool, typer.Option(help="Each variant timed in a fresh process.")] = RunOptions.cold_start,
    cold_runs: Annotated[int, typer.Option(help="With --cold-start: fresh processes per variant.")] = RunOptions.cold_runs,
    flush_l2: Annotated[bool, typer.Option(help="Flush the GPU L2 before each timed iteration.")] = RunOptions.flush_l2,
    profile: Annotated[str, typer.Option(help="none, minimal (torch.profiler) or full (+ Nsight).")] = RunOptions.profile,
    update_expectations: Annotated[bool, typer.Option(help="Rewrite expectations with this run.")] = RunOptions.update_expectations,
    seed: Annotated[int, typer.Option(help="Seed of the main pass.")] = RunOptions.seed,
    gpus: Gpus = RunOptions.gpus,
    shard: Shard = RunOptions.shard,
    confirm_runs: Annotated[int, typer.Option(help="Re-run a pair flagged regressed this many times; it stays "
                                                   "regressed only if the re-runs confirm (0: no re-run).")
                            ] = RunOptions.confirm_runs,
    junit_xml: Annotated[Path | None, typer.Option(help="Also write the results as JUnit XML here.")] = None,
    step_summary: Annotated[Path | None, typer.Option(
        help="Write a Markdown summary here (default: append to $GITHUB_STEP_SUMMARY when set).")] = None,
) -> None:
    """Verify, then time each pair; write artifacts; exit with the worst verdict's code."""
    options = _options(iterations=iterations, warmup=warmup, warmup_s=warmup_s, timing=timing,
                       artifacts_dir=artifacts_dir, device=device,
                       timeout_multiplier=timeout_multiplier, suite_timeout=suite_timeout,
                       reproducible=reproducible, cold_start=cold_start, cold_runs=cold_runs, flush_l2=flush_l2,
                       profile=profile, update_expectations=update_expectations, seed=seed, gpus=gpus, shard=shard,
                       confirm_runs=confirm_runs)
    raise typer.Exit(_run(targets, root, options, CiOutputs.from_cli(junit_xml, step_summary)))


@app.command(epilog=EXIT_CODES_HELP)
def verify(targets: Targets = None, root: Roots = None,
           device: Annotated[str, typer.Option(help="auto, cpu or cuda.")] = RunOptions.device,
           artifacts_dir: Annotated[Path, typer.Option(help="Where run folders go.")] = RunOptions.artifacts_dir,
           gpus: Gpus = RunOptions.gpus, shard: Shard = RunOptions.shard,
           ) -> None:
    """Import every pair and check correctness (no timing)."""
    raise typer.Exit(_run(targets, root, _options(verify_only=True, device=device, artifacts_dir=artifacts_dir,
                                                  gpus=gpus, shard=shard)))


def _run(targets: list[str] | None, root: list[Path] | None, options: RunOptions,
         ci: CiOutputs | None = None) -> int:
    try:
        return suite.run(targets or [], tuple(root or ()), options, ci=ci)
    except (TargetError, PlacementError) as exc:
        _fail_usage(str(exc))


@app.command()
def noise(targets: Targets = None, root: Roots = None,
          iterations: Annotated[int, typer.Option(help="Timed iterations per variant.")] = RunOptions.iterations,
          device: Annotated[str, typer.Option(help="auto, cpu or cuda.")] = RunOptions.device,
          artifacts_dir: Annotated[Path, typer.Option(help="Where run folders go.")] = RunOptions.artifacts_dir,
          ) -> None:
    """A/A calibration: time each variant against itself and store the noise floor per pair."""
    from aisp.judge.expectations import Unreadable
    from aisp.judge.noise import calibrate

    options = _options(iterations=iterations, device=device, artifacts_dir=artifacts_dir)
    try:
        pairs = resolve_targets(targets or [], repo_root(), tuple(root or ()))
    except TargetError as exc:
        _fail_usage(str(exc))
    try:
        rows = calibrate([p for p in pairs if not p.problem], options)
    except Unreadable as exc:
        _fail_usage(str(exc))
    table = Table("target", "file", "A/A ratio [95% CI]", "verdict")
    for pair in (p for p in pairs if p.problem):
        table.add_row(pair.target, "-", pair.problem, "error")
    for row in rows:
        ratio = row.get("aa_ratio")
        shown = f"{ratio['value']:.3f} [{ratio['low']:.3f}, {ratio['high']:.3f}]" if ratio else row.get("reason", "")
        table.add_row(row["target"], row["file"], shown, row["verdict"])
    Console().print(table)


@app.command("expectations")
def list_expectations(
    hardware: Annotated[str, typer.Option(help="Hardware key (h100, h200, 2x_h200, cpu).")],
    min_speedup: Annotated[float, typer.Option(help="List entries below this speedup.")] = 1.05,
) -> None:
    """List stored expectations whose speedup is below the bar."""
    from aisp.judge.expectations import Unreadable, below_bar

    try:
        rows = below_bar(repo_root(), hardware, min_speedup)
    except Unreadable as exc:
        _fail_usage(str(exc))
    table = Table("target", "speedup", "headline", "best", title=f"{hardware}: below {min_speedup:.2f}x")
    for row in rows:
        table.add_row(row["target"], f"{row['speedup']:.2f}x", row["headline"], row["best"] or "-")
    Console().print(table if rows else f"No {hardware} expectation is below {min_speedup:.2f}x.")
