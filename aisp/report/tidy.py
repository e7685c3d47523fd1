"""A run's results as a tidy CSV (``results.csv``): one row per pair x variant, one value per cell.

``summary.csv`` is for reading (``1.52x [1.47, 1.56]`` in one cell, ``-`` where nothing was
measured); this file is for ``pandas.read_csv``: every number in a column of its own, an empty cell
where a value is missing (read as NaN, so the column stays numeric), booleans as ``True``/``False``.
A pair without variant records (skipped, error, timeout) still gets one row, with its verdict and
reason and the variant columns empty.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from aisp.harness.artifacts import atomic_write_text

ID_COLUMNS = ("run_id", "hardware_key", "gpu_name", "git_commit", "target", "chapter", "pair",
              "pair_verdict", "pair_reason", "headline", "variant", "role", "is_best", "verdict", "reason")
SUMMARY_FIELDS = ("median", "mean", "p10", "p90", "min", "max", "std")
NUMBER_COLUMNS = (*(f"{f}_ms" for f in SUMMARY_FIELDS), "cv", "n", "host_median_ms", "speedup",
                  "speedup_low", "speedup_high", "tflops", "gbps", "items_per_s", "peak_bytes",
                  "pct_of_roofline", "throttled_samples")
COLUMNS = ID_COLUMNS + NUMBER_COLUMNS
TIDY_CSV = "results.csv"


def _number(value: Any) -> float | int | None:
    """A finite number, or None (an empty cell) for anything else ("inf" strings included)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if value == value and abs(value) != float("inf") else None


def _variant_numbers(var: dict[str, Any]) -> dict[str, Any]:
    summary = var.get("summary") or {}
    host = var.get("host_summary") or {}
    speedup = var.get("speedup") or {}
    rates = var.get("throughput") or {}
    numbers = {f"{f}_ms": summary.get(f) for f in SUMMARY_FIELDS}
    numbers.update(cv=summary.get("cv"), n=summary.get("n"), host_median_ms=host.get("median"),
                   speedup=speedup.get("value"), speedup_low=speedup.get("low"), speedup_high=speedup.get("high"),
                   tflops=rates.get("tflops"), gbps=rates.get("gbps"), items_per_s=rates.get("items_per_s"),
                   peak_bytes=(var.get("memory") or {}).get("peak_bytes"),
                   pct_of_roofline=(var.get("roofline") or {}).get("pct_of_bound"),
                   throttled_samples=len(var.get("throttled_samples") or {}) if var.get("summary") else None)
    return {key: _number(value) for key, value in numbers.items()}


def pair_rows(result: dict[str, Any], run: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of one pair: its baseline, then each optimized variant (or one row without any)."""
    head = {**run, "target": result.get("target"), "chapter": result.get("group"), "pair": result.get("name"),
            "pair_verdict": result.get("verdict"), "pair_reason": result.get("reason"),
            "headline": (result.get("workload") or {}).get("headline", "time")}
    base = result.get("baseline")
    records = ([("baseline", base)] if base else []) + [("optimized", v) for v in result.get("variants", [])]
    if not records:
        return [{**head, "is_best": False}]
    return [{**head, "variant": var.get("name"), "role": role, "is_best": var.get("name") == result.get("best"),
             "verdict": var.get("verdict"), "reason": var.get("reason"), **_variant_numbers(var)}
            for role, var in records]


def run_fields(summary: dict[str, Any], manifest: dict[str, Any], run_id: str) -> dict[str, Any]:
    """The columns every row of a run repeats: run id, hardware key, GPU, commit."""
    return {"run_id": summary.get("run_id") or run_id,
            "hardware_key": summary.get("hardware_key") or manifest.get("hardware_key"),
            "gpu_name": manifest.get("gpu_name"), "git_commit": manifest.get("git_commit")}


def rows(results: list[dict[str, Any]], run: dict[str, Any]) -> list[dict[str, Any]]:
    """Every row of a run's results."""
    return [row for result in results for row in pair_rows(result, run)]


def csv_text(table: list[dict[str, Any]]) -> str:
    """The rows as CSV with the fixed :data:`COLUMNS` header; None is an empty cell."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: ("" if v is None else v) for k, v in row.items()} for row in table)
    return buffer.getvalue()


def write_tidy(run_dir: Path, results: list[dict[str, Any]], run: dict[str, Any]) -> Path:
    """``RUN_DIR/results.csv`` of these results; returns its path."""
    path = run_dir / TIDY_CSV
    atomic_write_text(path, csv_text(rows(results, run)))
    return path
