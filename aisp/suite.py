"""One call from the CLI (and the chapter wrappers) to a finished, reported run.

This is where the harness meets the tools: the roofline, the profiler and the expectations join
a run as hooks (:class:`aisp.harness.runner.Hooks`), so the harness imports none of them.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from aisp.harness.artifacts import read_json
from aisp.harness.discovery import repo_root, resolve_targets
from aisp.harness.options import RunOptions
from aisp.harness.results import EXIT_CODES, exit_code
from aisp.harness.runner import Hooks, PairContext, Reporter, run_suite
from aisp.judge import expectations
from aisp.peak.measure import load_peaks
from aisp.profile.pair import attach_profile
from aisp.report.console import RichReporter
from aisp.report.roofline import add_roofline
from aisp.report.step_summary import CiOutputs
from aisp.report.tables import write_tables
from aisp.report.tidy import run_fields, write_tidy


def _roofline_step() -> Any:
    cache: dict[str, dict[str, Any] | None] = {}

    def step(result: dict[str, Any], ctx: PairContext) -> dict[str, Any]:
        key = ctx.manifest["hardware_key"]
        if key not in cache:
            cache[key] = load_peaks(key)
        return add_roofline(result, cache[key])
    return step


def _judge_step(result: dict[str, Any], ctx: PairContext) -> dict[str, Any]:
    return expectations.judge(result, ctx.manifest)


def _write_tables(run_dir: Path, results: list[dict[str, Any]]) -> None:
    """The run's Markdown and CSV summaries, and its tidy ``results.csv``."""
    write_tables(run_dir, results)
    write_tidy(run_dir, results, run_fields({}, read_json(run_dir / "manifest.json"), run_dir.name))


def hooks_for(options: RunOptions) -> Hooks:
    """The tools a run with these options brings in: profiling, roofline, expectations."""
    post = []
    if options.profile != "none":
        post.append(partial(attach_profile, nsight=options.profile == "full"))
    post.append(_roofline_step())
    if not options.verify_only:
        post.append(_judge_step)
    on_timed = "aisp.profile.capture:capture_for_run" if options.profile != "none" else None
    return Hooks(on_timed=on_timed, post=tuple(post), finish=_write_tables)


def run(targets: list[str], roots: tuple[Path, ...], options: RunOptions,
        reporter: Reporter | None = None, ci: CiOutputs | None = None) -> int:
    """Resolve targets, run them, write artifacts; returns the run's exit code.

    Raises TargetError for an unknown target. An expectations file that cannot be read is bad
    usage (exit 2 unless a worse verdict wins): every result is still written, the file is named
    on one line and left as it is.
    """
    pairs = resolve_targets(targets, repo_root(), roots)
    results, run_dir = run_suite(pairs, options, reporter or RichReporter(), hooks_for(options))
    if ci is not None:
        ci.write(results, run_dir.name, read_json(run_dir / "manifest.json")["hardware_key"])
    if options.update_expectations:
        written = expectations.update(results, read_json(run_dir / "manifest.json"))
        for path in written:
            Console().print(f"Expectations updated: {path}")
    unreadable = expectations.unreadable_files(results)
    for line in unreadable:
        Console(stderr=True).print(f"[red]error:[/red] expectations file unreadable, not compared nor updated: "
                                   f"{escape(line)}", soft_wrap=True)
    return max(exit_code(results), EXIT_CODES["usage"] if unreadable else 0)
