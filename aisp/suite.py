"""One call from the CLI (and the chapter wrappers) to a finished, reported run."""

from __future__ import annotations

from pathlib import Path

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
    results, _ = run_suite(pairs, options, reporter or RichReporter())
    return exit_code(results)
