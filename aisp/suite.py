"""One call from the CLI (and the chapter wrappers) to a finished, reported run."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from aisp import expectations
from aisp.artifacts import read_json
from aisp.console import RichReporter
from aisp.discovery import repo_root, resolve_targets
from aisp.options import RunOptions
from aisp.results import exit_code
from aisp.runner import Reporter, run_suite


def run(targets: list[str], roots: tuple[Path, ...], options: RunOptions,
        reporter: Reporter | None = None) -> int:
    """Resolve targets, run them, write artifacts; returns the run's exit code.

    Raises TargetError for an unknown target.
    """
    pairs = resolve_targets(targets, repo_root(), roots)
    judge = None if options.verify_only else expectations.judge
    results, run_dir = run_suite(pairs, options, reporter or RichReporter(), judge=judge)
    if options.update_expectations:
        written = expectations.update(results, read_json(run_dir / "manifest.json"))
        for path in written:
            Console().print(f"Expectations updated: {path}")
    return exit_code(results)
