"""A run's results as tables: one row per pair, Markdown and CSV renderings, the files a run writes
beside its JSON (``summary.md``/``summary.csv``, ``benchmark_test_results.md`` per pair)."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from aisp.harness.artifacts import atomic_write_text, best_variant, pair_result_path


def _fmt_ms(variant: dict[str, Any] | None) -> str:
    if not variant or not variant.get("summary"):
        return "-"
    return f"{variant['summary']['median']:.4g}"


def _fmt_speedup(ratio: dict[str, Any] | None) -> str:
    if not ratio:
        return "-"
    return f"{ratio['value']:.2f}x [{ratio['low']:.2f}, {ratio['high']:.2f}]"


def summary_rows(results: list[dict[str, Any]]) -> list[dict[str, str]]:
    """One row per pair: target, baseline ms, best optimized ms, speedup [95% CI], verdict."""
    rows = []
    for r in results:
        headline = r.get("workload", {}).get("headline", "time")
        rows.append({
            "target": r["target"],
            "baseline_ms": _fmt_ms(r.get("baseline")),
            "optimized_ms": _fmt_ms(best_variant(r)),
            "best": r.get("best") or "-",
            "speedup": _fmt_speedup(r.get("speedup")) + (f" ({headline})" if headline != "time" and r.get("speedup") else ""),
            "verdict": r["verdict"],
            "reason": r.get("reason") or "",
        })
    return rows


def note_lines(results: list[dict[str, Any]]) -> list[str]:
    """Every result's notes, one line each as ``target: note`` (settings a variant changed, samples
    taken while throttled, a pair whose answers computed ahead are not checked, ...)."""
    return [f"{r['target']}: {note}" for r in results for note in r.get("notes") or []]


def notes_markdown(lines: list[str]) -> str:
    """A "Notes" section listing ``lines``, or nothing without any."""
    return "\n## Notes\n\n" + "".join(f"- {line}\n" for line in lines) if lines else ""


def csv_rows(results: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The summary rows with each pair's notes (joined by "; ") as a last column."""
    return [{**row, "notes": "; ".join(r.get("notes") or [])}
            for row, r in zip(summary_rows(results), results, strict=True)]


def markdown_table(rows: list[dict[str, str]]) -> str:
    if not rows:
        return "(no pairs)\n"
    header = list(rows[0])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row[h].replace("|", "\\|").replace("\n", " ") for h in header) + " |"
              for row in rows]
    return "\n".join(lines) + "\n"


def csv_text(rows: list[dict[str, str]]) -> str:
    buffer = io.StringIO()
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return buffer.getvalue()


def pair_markdown(result: dict[str, Any]) -> str:
    lines = [f"# {result['target']}: {result['verdict']}", ""]
    if result.get("reason"):
        lines += [f"Reason: {result['reason']}", ""]
    variants = [v for v in [result.get("baseline"), *result.get("variants", [])] if v]
    rows = []
    for v in variants:
        s = v.get("summary") or {}
        rows.append({"variant": v["name"], "median_ms": f"{s['median']:.4g}" if s else "-",
                     "p10-p90_ms": f"{s['p10']:.4g}-{s['p90']:.4g}" if s else "-",
                     "cv": f"{s['cv']:.3f}" if s else "-",
                     "speedup": _fmt_speedup(v.get("speedup")),
                     "verdict": v.get("verdict", "-")})
    if rows:
        lines.append(markdown_table(rows))
    return "\n".join(lines) + notes_markdown(result.get("notes") or [])


def write_tables(run_dir: Path, results: list[dict[str, Any]]) -> None:
    """A run's Markdown and CSV beside its JSON: ``summary.md`` and ``summary.csv`` (one row per
    pair; the Markdown lists every result's notes under the table, the CSV has them as a column)
    and each pair's ``results/benchmark_test_results.md``."""
    for result in results:
        path = pair_result_path(run_dir, f"{result['group']}_{result['name']}")
        atomic_write_text(path.with_suffix(".md"), pair_markdown(result))
    atomic_write_text(run_dir / "summary.md", f"# Run {run_dir.name}\n\n" + markdown_table(summary_rows(results))
                      + notes_markdown(note_lines(results)))
    atomic_write_text(run_dir / "summary.csv", csv_text(csv_rows(results)))
