"""Compare every metric two variant results share, each judged in its own direction.

``compare_and_display_all_metrics(baseline, optimized, name=...)`` takes two VARIANT dicts (for a
pair result: ``result["baseline"]`` and ``best_variant(result)``) and compares time (median, mean,
p90: lower is better), peak memory (lower), throughput (TFLOP/s, GB/s, items/s: higher) and each
custom metric, whose direction comes from :data:`LOWER_IS_BETTER` / :data:`HIGHER_IS_BETTER`.
A metric whose name matches neither table, or both, is shown with direction "?" and no
better/worse call. ``include_raw_metrics=True`` adds the rest of the numbers: the other timing
statistics (p10, min, max, std, cv: lower), the host-clock median and every memory byte count.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

LOWER_IS_BETTER = {"suffix": ("_ms", "_bytes"), "contains": ("latency", "time")}
"""Custom metric names where a smaller value is an improvement."""
HIGHER_IS_BETTER = {"suffix": ("_per_s",), "contains": ("goodput", "tflops", "gbps", "throughput", "util")}
"""Custom metric names where a larger value is an improvement."""

HEADLINE_TIME = ("median", "mean", "p90")
RAW_TIME = ("p10", "min", "max", "std", "cv")
THROUGHPUT = ("tflops", "gbps", "items_per_s")


def _matches(name: str, table: dict[str, tuple[str, ...]]) -> bool:
    return name.endswith(table["suffix"]) or any(word in name for word in table["contains"])


def direction(name: str) -> str:
    """``lower``, ``higher`` or ``?`` (no entry in either table, or an entry in both)."""
    key = name.lower()
    lower = _matches(key, LOWER_IS_BETTER)
    higher = _matches(key, HIGHER_IS_BETTER)
    if lower == higher:
        return "?"
    return "lower" if lower else "higher"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _section(variant: dict[str, Any], key: str) -> dict[str, Any]:
    return variant.get(key) or {}


def _candidates(variant: dict[str, Any], raw: bool) -> Iterator[tuple[str, Any, str]]:
    """(metric name, value, direction) of everything a variant reports that we compare."""
    summary, host = _section(variant, "summary"), _section(variant, "host_summary")
    for stat in HEADLINE_TIME + (RAW_TIME if raw else ()):
        yield f"time_{stat}_ms" if stat != "cv" else "time_cv", summary.get(stat), "lower"
    if raw:
        yield "host_time_median_ms", host.get("median"), "lower"
    memory = _section(variant, "memory")
    for key in memory if raw else ("peak_bytes",):
        yield key, memory.get(key), direction(key)
    throughput = _section(variant, "throughput")
    for key in THROUGHPUT:
        yield key, throughput.get(key), "higher"
    for key, value in _section(variant, "metrics").items():
        yield key, value, direction(key)


def _row(metric: str, baseline: float, optimized: float, way: str) -> dict[str, Any]:
    change = (optimized - baseline) / abs(baseline) * 100 if baseline else None
    better = None
    if way != "?" and optimized != baseline:
        better = optimized < baseline if way == "lower" else optimized > baseline
    return {"metric": metric, "baseline": baseline, "optimized": optimized, "change_pct": change,
            "direction": way, "better": better}


def compare_metrics(baseline: dict[str, Any], optimized: dict[str, Any],
                    include_raw_metrics: bool = False) -> list[dict[str, Any]]:
    """One row per metric both variants report as a finite number (a custom metric named like a
    built-in one is left out: the built-in wins)."""
    other: dict[str, Any] = {}
    for name, value, _ in _candidates(optimized, include_raw_metrics):
        other.setdefault(name, value)
    rows: dict[str, dict[str, Any]] = {}
    for name, value, way in _candidates(baseline, include_raw_metrics):
        b, o = _number(value), _number(other.get(name))
        if b is not None and o is not None and name not in rows:
            rows[name] = _row(name, b, o, way)
    return list(rows.values())


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def metrics_table(report: dict[str, Any]) -> Table:
    """metric | baseline | optimized | change | better is | verdict."""
    title = f"{report['chapter']}: {report['name']}" if report["chapter"] else report["name"]
    table = Table(title=escape(title), caption=f"{report['improved']} improved, {report['regressed']} regressed")
    for column in ("metric", "baseline", "optimized", "change", "better is", "verdict"):
        table.add_column(column, overflow="fold")
    for row in report["metrics"]:
        change = f"{row['change_pct']:+.1f}%" if row["change_pct"] is not None else "-"
        verdict = {True: "[green]better[/green]", False: "[red]worse[/red]", None: "-"}[row["better"]]
        table.add_row(escape(row["metric"]), _fmt(row["baseline"]), _fmt(row["optimized"]), change,
                      row["direction"], verdict)
    return table


def compare_and_display_all_metrics(baseline_result: dict[str, Any], optimized_result: dict[str, Any],
                                    name: str, chapter: str | None = None, include_raw_metrics: bool = False,
                                    console: Console | None = None) -> dict[str, Any]:
    """Compare every shared metric of two variant results, print a table, return the comparison.

    ``change_pct`` is (optimized - baseline) / |baseline| in percent (``None`` when the baseline
    is 0); ``better`` is ``None`` where the direction is unknown or the values are equal.
    """
    rows = compare_metrics(baseline_result, optimized_result, include_raw_metrics)
    report = {"name": name, "chapter": chapter, "metrics": rows,
              "improved": sum(r["better"] is True for r in rows),
              "regressed": sum(r["better"] is False for r in rows)}
    (console or Console()).print(metrics_table(report))
    return report
