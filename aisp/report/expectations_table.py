"""The stored expectations of each chapter as a table (``aisp report expectations``), and that table
kept in the chapter's README between markers (``--write-readmes``).

A row is one entry of one ``chNN/expectations_<key>.json``: the latest stored run's best variant,
baseline and optimized figures and speedup with its 95% interval, then what the entry's
``history`` says about run-to-run noise: how many separate runs it holds, the range and geometric
mean of their speedups, their dates and commits. Every figure comes from the files; nothing is
measured here, so the README quotes exactly what a run is judged against.

The README block lies between :data:`START` and :data:`END`; text outside the markers is never
changed. A README without the markers gets the block appended under :data:`HEADING`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import geometric_mean
from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.table import Table

from aisp.harness.artifacts import atomic_write_text
from aisp.harness.discovery import chapters, normalize_chapter
from aisp.report.console import Column, fitted_table
from aisp.report.tables import markdown_table

START = "<!-- aisp:expectations:start -->"
END = "<!-- aisp:expectations:end -->"
HEADING = "## Stored expectations"
COMMAND = "python -m aisp report expectations --write-readmes"
FEW_RUNS = 3
"""Entries with fewer separate runs than this are counted apart: one run says nothing of the noise."""
FILE_RE = re.compile(r"^expectations_(.+)\.json$")

Stored = Mapping[Path, Mapping[str, Any]]
"""A chapter's expectation files and their entries by pair name, as
:func:`aisp.judge.expectations.load` reads them (the caller loads them: aisp.judge already imports
this package, so the two folders would import each other)."""


class SelectionError(ValueError):
    """A root, chapter or key that names nothing, or a README whose markers are broken."""


@dataclass(frozen=True)
class Row:
    """One stored entry, its figures formatted for a table cell."""

    pair: str
    key: str
    headline: str
    """What the speedup is a ratio of: ``time``, ``memory`` (peaks) or ``metric:<name>``."""
    best: str
    baseline: str
    """Baseline median time (``61.02 ms``), or its peak memory for a memory headline."""
    optimized: str
    speedup: str
    """Latest run: ``1.84x [1.83, 1.85]``, the headline named when it is not time."""
    runs: int
    """Separate runs in the entry's history (it restarts when a change of level is accepted)."""
    spread: str
    """Min-max of the history's speedups."""
    geomean: str
    """Geometric mean of the history's speedups (what a new run is judged against)."""
    dates: str
    """First and last day of the history's runs."""
    commits: str
    """The runs' distinct commits, ``+dirty`` where the tree had changes."""
    pending: str = ""
    """The speedup of a run held as pending (it left the level; the next run decides), else empty."""


def chapter_files(root: Path, wanted: Sequence[str] = (), keys: Sequence[str] = ()) -> dict[str, list[Path]]:
    """Each selected chapter's expectation files (of the selected keys), by chapter name. Raises
    :class:`SelectionError` for a root that is not a folder, a chapter not under it, or a key no
    selected chapter has a file of."""
    if not root.is_dir():
        raise SelectionError(f"--root {root}: no such folder")
    found = chapters(root)
    names = [normalize_chapter(c) for c in wanted] or list(found)
    if unknown := [n for n in names if n not in found]:
        raise SelectionError(f"unknown chapter {', '.join(unknown)} under {root} (chapters: {_span(found)})")
    files = {n: sorted(found[n].glob("expectations_*.json"), key=_file_order) for n in dict.fromkeys(names)}
    present = {key_of(p) for paths in files.values() for p in paths}
    if missing := [k for k in keys if k not in present]:
        raise SelectionError(f"no expectations_{missing[0]}.json in the chapters chosen "
                             f"(keys there: {', '.join(sorted(present, key=_key_order)) or 'none'})")
    return {n: [p for p in paths if not keys or key_of(p) in keys] for n, paths in files.items()}


def _span(found: dict[str, Path]) -> str:
    names = list(found)
    return f"{names[0]}..{names[-1]}" if len(names) > 1 else (names[0] if names else "none")


def key_of(path: Path) -> str:
    """The hardware key in a file's name: ``expectations_2x_h200.json`` -> ``2x_h200``."""
    match = FILE_RE.match(path.name)
    return match.group(1) if match else path.stem


def _key_order(key: str) -> tuple[int, str]:
    """One-GPU keys first, then by GPU count: h200, 2x_h200, 2x_h200_host4."""
    match = re.match(r"^(\d+)x_", key)
    return (int(match.group(1)) if match else 1, key)


def _file_order(path: Path) -> tuple[int, str]:
    return _key_order(key_of(path))


def chapter_rows(stored: Stored) -> list[Row]:
    """Every entry of a chapter's files, a pair's keys side by side."""
    rows = [entry_row(name, key_of(path), entry) for path, entries in stored.items()
            for name, entry in entries.items()]
    return sorted(rows, key=lambda r: (r.pair, _key_order(r.key)))


def entry_row(name: str, key: str, entry: dict[str, Any]) -> Row:
    """One entry as a row (``-`` where a figure is not stored, such as an entry with A/A noise only)."""
    history = entry.get("history") or []
    speedups = [h["speedup"] for h in history if h.get("speedup")]
    headline = entry.get("headline", "time")
    base, opt = _figures(entry, headline)
    return Row(pair=name, key=key, headline=headline, best=_variant(name, entry.get("best")), baseline=base, optimized=opt,
               speedup=_speedup(entry.get("speedup"), headline), runs=len(history),
               spread=f"{min(speedups):.2f}-{max(speedups):.2f}x" if speedups else "-",
               geomean=f"{geometric_mean(speedups):.2f}x" if speedups else "-",
               dates=_dates(history), commits=_commits(history, entry.get("provenance") or {}),
               pending=_pending(entry.get("pending")))


def _pending(run: dict[str, Any] | None) -> str:
    """A pending run's speedup (``6.99x``), or empty without one."""
    return f"{run['speedup']:.2f}x" if run and run.get("speedup") else ""


def _variant(pair: str, best: str | None) -> str:
    """The best variant's name past ``optimized_<pair>_`` (``tf32``); ``optimized`` for the plain one."""
    if not best:
        return "-"
    if best == f"optimized_{pair}":
        return "optimized"
    return best.removeprefix(f"optimized_{pair}_")


def _figures(entry: dict[str, Any], headline: str) -> tuple[str, str]:
    """(baseline, optimized): peak memory for a memory headline, else median times. A metric
    headline's values are not stored in the file, so its times are shown."""
    if headline == "memory":
        memory = entry.get("memory") or {}
        optimized, outside = _bytes(memory.get("optimized_peak_bytes")), memory.get("optimized_outside_bytes")
        return _bytes(memory.get("baseline_peak_bytes")), f"{optimized} + {_bytes(outside)} outside" if outside else optimized
    return _ms(entry.get("baseline_ms")), _ms(entry.get("optimized_ms"))


def _ms(value: float | None) -> str:
    """Four significant digits, trailing zeros kept (``1.300 ms``); whole ms from a second up."""
    if value is None:
        return "-"
    return f"{value:,.0f} ms" if value >= 1000 else f"{value:#.4g} ms"


def _bytes(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 2**30:.2f} GiB" if value >= 2**30 else f"{value / 2**20:.1f} MiB"


def _speedup(ratio: dict[str, Any] | None, headline: str) -> str:
    if not ratio:
        return "-"
    shown = f"{ratio['value']:.2f}x [{ratio['low']:.2f}, {ratio['high']:.2f}]"
    return shown if headline == "time" else f"{shown} ({headline.removeprefix('metric:')})"


def _dates(history: list[dict[str, Any]]) -> str:
    days = sorted(h["date"][:10] for h in history if h.get("date"))
    if not days:
        return "-"
    if days[0] == days[-1]:
        return days[0]
    return f"{days[0]} to {days[-1][5:] if days[0][:4] == days[-1][:4] else days[-1]}"


def _commits(history: list[dict[str, Any]], provenance: dict[str, Any]) -> str:
    """Distinct commits of the runs, oldest first, ``+dirty`` where a run's tree had changes (its
    diff hash, or the latest run's dirty flag); runs stored before commits were recorded counted."""
    shown: list[str] = []
    unrecorded = 0
    for i, run in enumerate(history):
        if not run.get("commit"):
            unrecorded += 1
            continue
        dirty = run.get("diff_sha256") or (i == len(history) - 1 and provenance.get("dirty"))
        name = run["commit"][:7] + ("+dirty" if dirty else "")
        if name not in shown:
            shown.append(name)
    if unrecorded:
        shown.append(f"{unrecorded} unrecorded")
    return ", ".join(shown) or "-"


HEADERS = ("pair", "key", "best", "baseline", "optimized", "speedup [95% CI], latest", "runs",
           "speedup range", "geomean", "dates", "commits")
COLUMNS = (Column("pair"), Column("key"), Column("best", drop_rank=2), Column("baseline", drop_rank=4),
           Column("optimized", drop_rank=5), Column(HEADERS[5]), Column("runs"), Column("speedup range", drop_rank=6),
           Column("geomean", drop_rank=3), Column("dates", drop_rank=1), Column("commits", wraps=True, drop_rank=0))
"""The console's columns: on a narrow terminal the commits go first, then the dates, the best variant..."""


def cells(row: Row) -> list[str]:
    runs = f"{row.runs} (+1 pending at {row.pending})" if row.pending else str(row.runs)
    return [row.pair, row.key, row.best, row.baseline, row.optimized, row.speedup, runs,
            row.spread, row.geomean, row.dates, row.commits]


def markdown(rows: Sequence[Row]) -> str:
    """The rows as a Markdown table."""
    return markdown_table([dict(zip(HEADERS, cells(r), strict=True)) for r in rows])


def table(rows: Sequence[Row], title: str, width: int) -> Table | Group:
    """The rows as a rich table fitted to ``width``; entries with fewer than :data:`FEW_RUNS` runs
    have their count in yellow."""
    styled = []
    for row in rows:
        text = [escape(c) for c in cells(row)]
        if row.runs < FEW_RUNS:
            text[6] = f"[yellow]{text[6]}[/yellow]"
        styled.append(text)
    return fitted_table(COLUMNS, styled, width - 1, title=title)  # - 1: the left border


def source_sentence(stored: Stored) -> str:
    """Where the figures come from: the files, the GPUs each was measured on, the command."""
    named = [f"`{path.name}` ({_gpus(path, entries)})" for path, entries in stored.items()]
    listed = named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]
    return (f"Generated from this chapter's {listed}: per pair, the latest stored run and its 95% interval, "
            f"then the speedups of the separate runs in the entry's history (it restarts when a changed "
            f"level is accepted); regenerate with `{COMMAND}` (text outside these markers is hand-written).")


def _gpus(path: Path, entries: Mapping[str, Any]) -> str:
    """What a file's entries ran on, from their environments: ``1 x NVIDIA H200``, ``2 x NVIDIA H200
    of a 4-GPU host``; the key where no entry records it."""
    seen = []
    for entry in entries.values():
        env = entry.get("environment") or {}
        if not env.get("gpu_name"):
            continue
        text = f"{env.get('gpu_count') or 1} x {env['gpu_name']}"
        if env.get("host_gpu_count"):
            text += f" of a {env['host_gpu_count']}-GPU host"
        if text not in seen:
            seen.append(text)
    return "; ".join(seen) or key_of(path)


def headline_note(rows: Sequence[Row]) -> str:
    """Where a row's ratio is not of time, what it is of; empty where every ratio is of time."""
    kinds = {r.headline.partition(":")[0] for r in rows} - {"time"}
    parts = {"memory": "of peak memory (the peaks are shown instead of the times)",
             "metric": "of the metric named (its values are not stored; the times are shown)"}
    if not kinds:
        return ""
    return " A speedup followed by a name in brackets is a ratio " + " or ".join(parts.get(k, f"of {k}") for k in sorted(kinds)) + "."


def readme_block(stored: Stored, rows: Sequence[Row]) -> str:
    """The marked block: the sentence, then the table."""
    return f"{START}\n{source_sentence(stored)}{headline_note(rows)}\n\n{markdown(rows)}{END}"


def with_block(text: str, block: str) -> str:
    """``text`` with its marked block replaced by ``block``, or ``block`` appended under
    :data:`HEADING` where it has none. Raises :class:`SelectionError` when the markers are not one
    start followed by one end (a hand edit that lost one): guessing could delete hand-written text."""
    starts, ends = text.count(START), text.count(END)
    if starts == ends == 0:
        return f"{text.rstrip()}\n\n{HEADING}\n\n{block}\n"
    if starts != 1 or ends != 1 or text.index(START) > text.index(END):
        raise SelectionError(f"{starts} start and {ends} end markers ({START} ... {END}), expected one of each in order")
    head, rest = text.split(START)
    return head + block + rest.split(END, 1)[1]


def write_readmes(stored: Mapping[str, Stored], rows: Mapping[str, list[Row]]) -> list[str]:
    """Put each chapter's block in its README (atomically), one line per chapter saying what was
    done. Every README is read and checked before any is written: broken markers in one raise
    :class:`SelectionError` naming it, and no README is changed."""
    planned: dict[Path, str] = {}
    lines = []
    for name, files in stored.items():
        readme = next(iter(files)).parent / "README.md" if files else None
        if not rows[name] or readme is None:
            lines.append(f"{name}: no stored expectations; README not changed")
        elif not readme.exists():
            lines.append(f"{name}: no README.md; not written")
        else:
            text = readme.read_text()
            try:
                new = with_block(text, readme_block(files, rows[name]))
            except SelectionError as exc:
                raise SelectionError(f"{readme}: {exc}") from None
            if new != text:
                planned[readme] = new
            lines.append(f"Wrote {readme}" if new != text else f"Unchanged: {readme}")
    for readme, new in planned.items():
        atomic_write_text(readme, new)
    return lines
