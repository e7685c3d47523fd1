"""Proof of benefit: every pair's most recent result under an artifacts folder, with a status.

Each run folder (``<artifacts>/<timestamp>/summary.json``) is read; per pair and hardware key (of
the GPUs the pair used, as its expectations were judged: a one-GPU pair on a 2 x H200 host is
``h200``) the newest run wins (newest by the run's timestamp id, else by the summary file's time).

A verify-only run (``aisp bench verify``) proves correctness, not benefit: its passing results are
ignored (they neither replace a timed result nor make a "no measured speedup" row of their own). Its
failures (verify-failed, error, timeout) do replace the pair's newest timed result on the same
hardware -- a verify-only result carries no expectation, so its key is the run's; a run key that
names a GPU count (``2x_h200``) also matches the one-GPU key (``h200``) -- or, with none, make a row.

Status per pair: ``ok`` (speedup, or memory ratio for a memory-headline pair, at or above the bar,
its 95% interval above 1), ``ok-unchecked`` (a timed pair whose baseline declares no per-call
inputs, so an answer computed ahead would pass; the reason says how its figures stand),
``inconclusive`` (the interval holds 1), ``needs-work`` (below the bar, or no measured speedup), ``regressed``, ``verify-failed``,
``error`` (error or timeout) and ``skipped``. Every result's notes are in the last column.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aisp.harness.artifacts import atomic_write_text, best_variant, read_json
from aisp.report.tables import csv_text, markdown_table

DEFAULT_MIN_SPEEDUP = 1.05
COLUMNS = ("target", "hardware", "status", "speedup", "low", "high", "headline", "baseline_ms",
           "optimized_ms", "best", "run_id", "reason", "notes")
STATUSES = ("ok", "ok-unchecked", "inconclusive", "needs-work", "regressed", "verify-failed", "error", "skipped")
STATUS_BY_VERDICT = {"regressed": "regressed", "verify-failed": "verify-failed", "error": "error",
                     "timeout": "error", "skipped": "skipped"}
RUN_ID = re.compile(r"^(\d{8}-\d{6})(?:-(\d+))?$")


@dataclass(frozen=True)
class Run:
    """One run folder's summary and when it ran."""

    path: Path
    summary: dict[str, Any]
    order: tuple[str, int, str]
    """(timestamp YYYYmmdd-HHMMSS, same-second counter, folder): sorts oldest first."""

    @property
    def run_id(self) -> str:
        return str(self.summary.get("run_id") or self.path.name)

    @property
    def verify_only(self) -> bool:
        return bool((self.summary.get("options") or {}).get("verify_only"))


def _order(path: Path, summary: dict[str, Any]) -> tuple[str, int, str]:
    match = RUN_ID.match(str(summary.get("run_id") or path.parent.name))
    if match:
        return match.group(1), int(match.group(2) or 0), str(path.parent)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(path.stat().st_mtime))
    return stamp, 0, str(path.parent)


def load_runs(artifacts_dir: Path) -> tuple[list[Run], list[str]]:
    """Every readable run under the folder, oldest first, and a line per unreadable summary."""
    runs, problems = [], []
    for path in sorted(artifacts_dir.rglob("summary.json")):
        try:
            summary = read_json(path)
        except ValueError as exc:
            problems.append(str(exc))
            continue
        results = summary.get("results")
        if not isinstance(results, list) or not all(isinstance(r, dict) and {"target", "verdict"} <= r.keys()
                                                    for r in results):
            problems.append(f"{path}: no 'results' list of pairs; not a run summary")
            continue
        runs.append(Run(path.parent, summary, _order(path, summary)))
    return sorted(runs, key=lambda r: r.order), problems


def hardware(result: dict[str, Any], run: Run) -> str:
    """The key of the GPUs the pair used (as its expectations were judged), else the run's."""
    return str((result.get("expectation") or {}).get("hardware_key") or run.summary.get("hardware_key") or "?")


def _same_gpu(run_key: str, key: str) -> bool:
    """Whether a verify-only run's key covers a timed result's: equal, or ``2x_h200`` for ``h200``."""
    return key == run_key or run_key.endswith(f"x_{key}")


def latest_results(runs: list[Run]) -> dict[tuple[str, str], tuple[dict[str, Any], Run]]:
    """(target, hardware key) -> (newest result, its run); ``runs`` must be oldest first. Passing
    results of verify-only runs are skipped; their failures replace the matching timed results."""
    latest: dict[tuple[str, str], tuple[dict[str, Any], Run]] = {}
    for run in runs:
        for result in run.summary["results"]:
            key = (result["target"], hardware(result, run))
            if not run.verify_only:
                latest[key] = (result, run)
            elif result.get("verdict") in STATUS_BY_VERDICT and result["verdict"] != "skipped":
                matching = [k for k in latest if k[0] == key[0] and _same_gpu(key[1], k[1])]
                for k in matching or [key]:
                    latest[k] = (result, run)
    return latest


def status(result: dict[str, Any], min_speedup: float) -> tuple[str, str]:
    """(status, reason) of one pair result against the bar."""
    reason = result.get("reason") or ""
    if result["verdict"] in STATUS_BY_VERDICT:
        return STATUS_BY_VERDICT[result["verdict"]], reason
    speedup = result.get("speedup")
    if not speedup:
        return "needs-work", "; ".join(filter(None, ["no measured speedup", reason]))
    notes = [reason]
    holds_one = speedup["low"] <= 1.0 <= speedup["high"] and speedup["low"] < speedup["high"]
    if holds_one:
        notes.append(f"interval [{speedup['low']:.2f}, {speedup['high']:.2f}] includes 1.0")
    below = speedup["value"] < min_speedup
    if below:
        notes.append(f"{speedup['value']:.2f}x is below the {min_speedup:.2f}x bar")
    if result["verdict"] == "ok-unchecked":  # the mark stays, whatever the figures
        pair_status = "ok-unchecked"
    elif holds_one or result["verdict"] == "inconclusive":
        pair_status = "inconclusive"
    else:
        pair_status = "needs-work" if below else "ok"
    return pair_status, "; ".join(filter(None, notes))


def _num(value: float | None, fmt: str) -> str:
    return format(value, fmt) if value is not None else ""


def _median(variant: dict[str, Any] | None) -> float | None:
    summary = (variant or {}).get("summary")
    return summary["median"] if summary else None


def row(result: dict[str, Any], run: Run, min_speedup: float, hardware_key: str | None = None) -> dict[str, str]:
    """One CSV/Markdown row of the report (``hardware_key``: the row's, default the result's own)."""
    pair_status, reason = status(result, min_speedup)
    speedup = result.get("speedup") or {}
    return {
        "target": result["target"], "hardware": hardware_key or hardware(result, run),
        "status": pair_status, "speedup": _num(speedup.get("value"), ".3f"),
        "low": _num(speedup.get("low"), ".3f"), "high": _num(speedup.get("high"), ".3f"),
        "headline": (result.get("workload") or {}).get("headline", "time"),
        "baseline_ms": _num(_median(result.get("baseline")), ".4g"),
        "optimized_ms": _num(_median(best_variant(result)), ".4g"),
        "best": result.get("best") or "", "run_id": run.run_id, "reason": reason,
        "notes": "; ".join(result.get("notes") or []),
    }


def proof_rows(artifacts_dir: Path, min_speedup: float = DEFAULT_MIN_SPEEDUP) -> tuple[list[dict[str, str]], list[str]]:
    """(one row per pair and hardware key, sorted; lines about unreadable summaries)."""
    if not artifacts_dir.is_dir():
        raise FileNotFoundError(f"{artifacts_dir}: no such artifacts folder")
    runs, problems = load_runs(artifacts_dir)
    latest = latest_results(runs)
    return [row(*latest[key], min_speedup, key[1]) for key in sorted(latest)], problems


def counts(rows: list[dict[str, str]]) -> dict[str, int]:
    """How many pairs have each status (every status listed, zeros included)."""
    return {s: sum(r["status"] == s for r in rows) for s in STATUSES}


def tally(rows: list[dict[str, str]]) -> str:
    """"5 pairs: 3 ok, 1 needs-work, ..." (every status listed, zeros included)."""
    return f"{len(rows)} pairs: " + ", ".join(f"{n} {s}" for s, n in counts(rows).items())


def markdown(rows: list[dict[str, str]], artifacts_dir: Path, min_speedup: float) -> str:
    return (f"# Proof of benefit\n\nArtifacts: `{artifacts_dir}`. Bar: {min_speedup:.2f}x. "
            f"{tally(rows)}.\n\n" + markdown_table(rows))


def write_report(rows: list[dict[str, str]], csv_path: Path, artifacts_dir: Path,
                 min_speedup: float) -> tuple[Path, Path]:
    """Write the CSV and a Markdown file beside it (same stem, ``.md``), each atomically."""
    md_path = csv_path.with_suffix(".md")
    atomic_write_text(csv_path, csv_text(rows) or ",".join(COLUMNS) + "\n")
    atomic_write_text(md_path, markdown(rows, artifacts_dir, min_speedup))
    return csv_path, md_path
