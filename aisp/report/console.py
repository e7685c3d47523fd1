"""Rich display of a run: a progress bar with a live table, then the final summary table."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from aisp.harness.discovery import Pair
from aisp.report.tables import note_lines, summary_rows

VERDICT_STYLE = {"ok": "green", "inconclusive": "cyan", "ok-unchecked": "magenta", "skipped": "dim",
                 "slower": "yellow", "regressed": "red", "verify-failed": "bold red", "error": "bold red",
                 "timeout": "bold red"}


def results_table(results: list[dict[str, Any]], title: str = "Results") -> Table:
    """pair | baseline ms | optimized ms | best | speedup [95% CI] | verdict | reason."""
    table = Table(title=title, show_lines=False)
    for column in ("pair", "baseline ms", "optimized ms", "best", "speedup [95% CI]", "verdict", "reason"):
        table.add_column(column, overflow="fold")
    for row in summary_rows(results):
        style = VERDICT_STYLE.get(row["verdict"], "")
        reason = row["reason"] if len(row["reason"]) < 160 else row["reason"][:157] + "..."
        table.add_row(row["target"], row["baseline_ms"], row["optimized_ms"], row["best"], row["speedup"],
                      f"[{style}]{row['verdict']}[/{style}]" if style else row["verdict"], reason)
    return table


def eta_seconds(elapsed_s: float, done: int, total: int) -> float | None:
    """Seconds left at the pace so far (pairs finished per second of the run, which counts every GPU
    working at once); None before the first pair finishes."""
    return elapsed_s * (total - done) / done if done else None


class RichReporter:
    """Progress bar and live table while pairs run (with ``--gpus``, each GPU's current pair and an
    ETA); the summary table and run folder at the end."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(width=None if Console().is_terminal else 150)
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=self.console)
        self.results: list[dict[str, Any]] = []
        self.live: Live | None = None
        self.task = None
        self.running: dict[str, str] = {}
        """Target -> where it runs ("GPU 2"), for the pairs running now."""
        self.started, self.total = time.monotonic(), 0

    def _view(self) -> Group:
        parts: list = [self.progress]
        if any(self.running.values()):
            table = Table("GPU", "running", title=self._eta())
            for target, where in sorted(self.running.items(), key=lambda kv: kv[1]):
                table.add_row(where, target)
            parts.append(table)
        return Group(*parts, results_table(self.results, title="Finished so far"))

    def _eta(self) -> str:
        left = eta_seconds(time.monotonic() - self.started, len(self.results), self.total)
        return "ETA: after the first pair" if left is None else f"ETA: about {left / 60:.0f} min"

    def start(self, pairs: list[Pair]) -> None:
        self.started, self.total = time.monotonic(), len(pairs)
        self.task = self.progress.add_task("pairs", total=len(pairs))
        self.live = Live(self._view(), console=self.console, refresh_per_second=4, transient=True)
        self.live.start()

    def pair_started(self, pair: Pair, where: str = "") -> None:
        self.running[pair.target] = where
        self.progress.update(self.task, description=f"running {', '.join(self.running)}" if not where
                             else f"{len(self.running)} running")
        if self.live:
            self.live.update(self._view())

    def pair_done(self, result: dict[str, Any]) -> None:
        self.running.pop(result["target"], None)
        self.results.append(result)
        self.progress.advance(self.task)
        if self.live:
            self.live.update(self._view())

    def finish(self, results: list[dict[str, Any]], run_dir: Path) -> None:
        if self.live:
            self.live.stop()
        self.console.print(results_table(results))
        notes = note_lines(results)
        if notes:
            self.console.print("Notes:")
        for line in notes:
            self.console.print(f"  {escape(line)}", soft_wrap=True)
        self.console.print(f"Artifacts: {run_dir}")
