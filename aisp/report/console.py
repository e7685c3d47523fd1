"""Console display of a run: on a terminal, a progress bar with a live table; elsewhere (a CI log, a
file) one line per finished pair; then the summary table, fitted to the console's width.

Tables fit the width by dropping optional columns (least useful first) rather than wrapping every
cell: a pair name is never split; only the reason column wraps.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.padding import Padding
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from aisp.harness.discovery import Pair
from aisp.report.tables import note_lines, summary_rows

VERDICT_STYLE = {"ok": "green", "inconclusive": "cyan", "ok-unchecked": "magenta", "skipped": "dim",
                 "slower": "yellow", "regressed": "red", "verify-failed": "bold red", "error": "bold red",
                 "timeout": "bold red"}
REASON_MIN_WIDTH = 24
"""The wrapping column keeps at least this many characters; optional columns go first."""
WRAP_LEAST = 12
"""Below this many characters even the wrapping column is unreadable: the rows are stacked instead."""
CELL_PADDING = 3
"""Characters rich adds per column (a space each side and a border)."""
STILL_RUNNING_S = 60.0
"""Off a terminal, a pair still running after this many seconds gets a line naming it (once)."""


@dataclass(frozen=True)
class Column:
    """A table column: its header, whether it wraps (only the reason does) and, for an optional
    one, its rank (lower rank: dropped first when the table is too wide; None: always shown)."""

    header: str
    wraps: bool = False
    drop_rank: int | None = None


def _needed(column: Column, cells: Sequence[str]) -> int:
    """Characters a column takes: its widest cell (or header), REASON_MIN_WIDTH if it wraps, plus padding."""
    if column.wraps:
        return REASON_MIN_WIDTH + CELL_PADDING
    return max([len(column.header), *(len(_plain(cell)) for cell in cells)]) + CELL_PADDING


def fitted_columns(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int) -> list[int]:
    """Indices of the columns to show at ``width``: optional ones dropped, lowest rank first, until
    the non-wrapping columns at their widest cell leave the wrapping ones REASON_MIN_WIDTH each."""
    def needed(col: int) -> int:
        return _needed(columns[col], [r[col] for r in rows])

    shown = list(range(len(columns)))
    droppable = sorted((c for c in shown if columns[c].drop_rank is not None), key=lambda c: columns[c].drop_rank)
    while droppable and sum(needed(c) for c in shown) > width:
        shown.remove(droppable.pop(0))
    return shown


def stacked(columns: Sequence[Column], rows: Sequence[Sequence[str]], title: str | None = None) -> Group:
    """Rows too wide for any table at this width, one block each: the first cell on its own line
    (when there is one: continuation rows leave it empty), then every other non-empty cell as
    ``header: value``, separated by " · " and wrapped at spaces, so no name is cut or split."""
    lines: list[Any] = [Text(title, style="italic")] if title else []
    for row in rows:
        if _plain(row[0]):
            lines.append(Text.from_markup(row[0], style="bold"))
        rest = [f"{escape(columns[c].header)}: {row[c]}" for c in range(1, len(columns)) if _plain(row[c])]
        if rest:  # indented, wrapped lines too
            lines.append(Padding(Text.from_markup(" · ".join(rest)), (0, 0, 0, 2)))
    return Group(*lines)


def _plain(cell: str) -> str:
    """A cell's text without rich markup (for measuring)."""
    return Text.from_markup(cell).plain


def fitted_table(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int,
                 **table_args: Any) -> Table | Group:
    """A rich table of the columns that fit ``width``; only wrapping columns wrap, the others never
    split (a name stays on one line). When even the columns that cannot be left out do not fit (long
    names on an 80-column terminal), each row is stacked instead: :func:`stacked`."""
    shown = fitted_columns(columns, rows, width)
    least = sum(WRAP_LEAST + CELL_PADDING if columns[c].wraps else _needed(columns[c], [r[c] for r in rows])
                for c in shown)
    if least > width:
        return stacked(columns, rows, table_args.get("title"))
    table = Table(**table_args)
    for c in shown:
        col = columns[c]
        table.add_column(col.header, no_wrap=not col.wraps, overflow="fold" if col.wraps else "ellipsis",
                         min_width=REASON_MIN_WIDTH if col.wraps else None)
    for row in rows:
        table.add_row(*(row[c] for c in shown))
    return table


RESULT_COLUMNS = (Column("pair"), Column("baseline ms", drop_rank=1), Column("optimized ms", drop_rank=2),
                  Column("best", drop_rank=0), Column("speedup [95% CI]"), Column("verdict"),
                  Column("reason", wraps=True))


def _styled(verdict: str) -> str:
    style = VERDICT_STYLE.get(verdict, "")
    return f"[{style}]{verdict}[/{style}]" if style else verdict


def results_table(results: list[dict[str, Any]], title: str = "Results", width: int = 150) -> Table | Group:
    """pair | baseline ms | optimized ms | best | speedup [95% CI] | verdict | reason, fitted to ``width``."""
    rows = []
    for row in summary_rows(results):
        reason = row["reason"] if len(row["reason"]) < 160 else row["reason"][:157] + "..."
        rows.append([escape(row["target"]), row["baseline_ms"], row["optimized_ms"], escape(row["best"]),
                     row["speedup"], _styled(row["verdict"]), escape(reason)])
    return fitted_table(RESULT_COLUMNS, rows, width, title=title)


def eta_seconds(elapsed_s: float, done: int, total: int) -> float | None:
    """Seconds left at the pace so far (pairs finished per second of the run, which counts every GPU
    working at once); None before the first pair finishes."""
    return elapsed_s * (total - done) / done if done else None


def progress_line(result: dict[str, Any], done: int, total: int, seconds: float | None) -> str:
    """One finished pair as a plain log line: ``[12/160] ch05:packed_shards ok 1.52x [1.47, 1.56] 3.1 s``
    (the reason after the verdict where there is no speedup)."""
    speedup = result.get("speedup")
    detail = (f"{speedup['value']:.2f}x [{speedup['low']:.2f}, {speedup['high']:.2f}]" if speedup
              else (result.get("reason") or "").splitlines()[0][:100] if result.get("reason") else "")
    parts = [f"[{done:>{len(str(total))}}/{total}]", result["target"], result["verdict"], detail,
             f"{seconds:.1f} s" if seconds is not None else ""]
    return " ".join(p for p in parts if p)


def _pair_seconds(result: dict[str, Any], started: float | None, now: float) -> float | None:
    """The pair's wall time: its workers' total from the result's phases, else since it started here."""
    total = (result.get("phases") or {}).get("total")
    if isinstance(total, (int, float)):
        return float(total)
    return now - started if started is not None else None


class RichReporter:
    """Progress bar and live table while pairs run (with ``--gpus``, each GPU's current pair and an
    ETA); or, with ``lines`` (default: stdout is not a terminal), one line per finished pair. The
    summary table and run folder at the end."""

    def __init__(self, console: Console | None = None, lines: bool | None = None, verb: str = "running",
                 timer: Callable[[float, Callable[[], None]], threading.Timer] = threading.Timer) -> None:
        terminal = Console().is_terminal
        self.verb = verb
        """What the live view says the pairs in flight are doing ("verifying" for ``aisp bench verify``)."""
        self.console = console or Console(width=None if terminal else 150)
        self.lines = (not terminal and console is None) if lines is None else lines
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=self.console)
        self.results: list[dict[str, Any]] = []
        self.live: Live | None = None
        self.task = None
        self.running: dict[str, str] = {}
        """Target -> where it runs ("GPU 2"), for the pairs running now."""
        self.started_at: dict[str, float] = {}
        self.steps: dict[str, str] = {}
        """Target -> the step its worker is in (setup, verify, timed...), for the pairs running now."""
        self.timer = timer
        """Starts the "still running" notice of a pair (a fake in tests)."""
        self.timers: dict[str, threading.Timer] = {}
        self.started, self.total, self.earlier = time.monotonic(), 0, 0

    def _view(self) -> Group:
        parts: list = [self.progress]
        if any(self.running.values()):
            table = Table("GPU", "running", "step", title=self._eta())
            for target, where in sorted(self.running.items(), key=lambda kv: kv[1]):
                table.add_row(where, target, self.steps.get(target, ""))
            parts.append(table)
        return Group(*parts, results_table(self.results, title="Finished so far", width=self.console.width))

    def _eta(self) -> str:
        left = eta_seconds(time.monotonic() - self.started, len(self.results), self.total - self.earlier)
        return "ETA: after the first pair" if left is None else f"ETA: about {left / 60:.0f} min"

    def start(self, pairs: list[Pair], earlier: int = 0, total: int | None = None) -> None:
        """``earlier`` of the run's ``total`` pairs finished in its earlier parts (--resume): the count
        starts from them, and the ETA is at this part's own pace."""
        self.started, self.earlier = time.monotonic(), earlier
        self.total = len(pairs) + earlier if total is None else total
        if self.lines:
            self.console.print(f"{self.verb.capitalize()} {len(pairs)} pairs" + (
                f" ({earlier} of the run's {self.total} finished earlier)" if earlier else ""), soft_wrap=True)
            return
        self.task = self.progress.add_task("pairs", total=self.total, completed=earlier)
        self.live = Live(self._view(), console=self.console, refresh_per_second=4, transient=True)
        self.live.start()

    def pair_started(self, pair: Pair, where: str = "") -> None:
        self.running[pair.target] = where
        self.started_at[pair.target] = time.monotonic()
        if self.lines:
            notice = self.timer(STILL_RUNNING_S, lambda: self.still_running(pair.target))
            notice.daemon = True
            notice.start()
            self.timers[pair.target] = notice
            return
        self._show(where)

    def _show(self, where: str = "") -> None:
        named = ", ".join(f"{t} ({self.steps[t]})" if t in self.steps else t for t in self.running)
        self.progress.update(self.task, description=f"{self.verb} {named}" if not where
                             else f"{len(self.running)} {self.verb}")
        if self.live:
            self.live.update(self._view())

    def pair_step(self, pair: Pair, step: str) -> None:
        """The step a running pair is in: in the live view (off a terminal, in the "still" notice)."""
        if pair.target in self.running:
            self.steps[pair.target] = step
            if not self.lines and self.task is not None:
                self._show(self.running[pair.target])

    def still_running(self, target: str) -> None:
        """Off a terminal: name a pair that runs long, so a log shows where the time goes."""
        if target in self.running:
            step = f"{self.steps[target]}, " if target in self.steps else ""
            self.console.print(escape(f"  ... still {self.verb} {target} ({step}{time.monotonic() - self.started_at[target]:.0f} s)"),
                               soft_wrap=True, highlight=False)

    def pair_done(self, result: dict[str, Any]) -> None:
        self.running.pop(result["target"], None)
        self.steps.pop(result["target"], None)
        notice = self.timers.pop(result["target"], None)
        if notice is not None:
            notice.cancel()
        self.results.append(result)
        if self.lines:
            seconds = _pair_seconds(result, self.started_at.get(result["target"]), time.monotonic())
            self.console.print(escape(progress_line(result, self.earlier + len(self.results), self.total, seconds)),
                               soft_wrap=True, highlight=False)
            return
        self.progress.advance(self.task)
        if self.live:
            self.live.update(self._view())

    def finish(self, results: list[dict[str, Any]], run_dir: Path) -> None:
        for notice in self.timers.values():
            notice.cancel()
        if self.live:
            self.live.stop()
        self.console.print(results_table(results, width=self.console.width))
        notes = note_lines(results)
        if notes:
            self.console.print("Notes:")
        for line in notes:
            self.console.print(f"  {escape(line)}", soft_wrap=True)
        self.console.print(f"Artifacts: {run_dir}")
