"""Compare chapter 13's performance between two runs: the chapter's entry to ``aisp bench compare``.

``compare.py`` runs the chapter; this script answers the next question, "did ch13 get faster or
slower since the last run?". It takes two run folders (by default the two newest timed runs under
the artifacts folder that hold ch13 pairs), compares every ch13 pair and variant of the newer one
with the older one as ``aisp bench compare`` does (median time ratio with its 95% interval,
Mann-Whitney U, each variant's run-to-run threshold from the stored expectations), and prints only
this chapter's rows. Exit codes: 0 no ch13 pair is slower; 2 fewer than two runs, a missing or
unreadable run folder; 3 some ch13 pair is significantly slower in the newer run.

Run: python ch13/compare_perf.py                          # the two newest runs holding ch13 pairs
     python ch13/compare_perf.py artifacts/RUN_A artifacts/RUN_B --threshold 0.05
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from aisp.judge.compare_runs import any_slower, compare_runs

CHAPTER = "ch13"
EXIT_USAGE, EXIT_SLOWER = 2, 3


def chapter_runs(artifacts: Path, chapter: str = CHAPTER) -> list[Path]:
    """Timed runs under ``artifacts`` holding pairs of ``chapter``, newest first (by folder name, a
    timestamp); verify-only runs and folders without a readable summary are passed over."""
    found = []
    for folder in sorted((p for p in artifacts.iterdir() if p.is_dir()), reverse=True) if artifacts.is_dir() else []:
        try:
            summary = json.loads((folder / "summary.json").read_text())
        except (OSError, ValueError):
            continue
        timed = not (summary.get("options") or {}).get("verify_only")
        if timed and any(str(r.get("target", "")).startswith(f"{chapter}:") for r in summary.get("results", [])):
            found.append(folder)
    return found


def chapter_comparison(run_a: Path, run_b: Path, threshold: float | None, chapter: str = CHAPTER) -> dict[str, Any]:
    """``compare_runs`` of the two runs with only this chapter's pairs kept."""
    comparison = compare_runs(run_a, run_b, threshold)
    return {**comparison, "pairs": [p for p in comparison["pairs"] if p["target"].startswith(f"{chapter}:")]}


def _ratio(row: dict[str, Any]) -> str:
    ratio = row.get("ratio")
    return f"{ratio['value']:.3f} [{ratio['low']:.3f}, {ratio['high']:.3f}]" if ratio else "-"


def table(comparison: dict[str, Any]) -> Table:
    """pair | variant | A ms | B ms | time B/A [95% CI] | status."""
    out = Table(title=f"{CHAPTER}: {Path(comparison['run_b']).name} vs {Path(comparison['run_a']).name}")
    for name in ("pair", "variant", "A ms", "B ms", "time B/A [95% CI]", "status"):
        out.add_column(name, no_wrap=name in ("pair", "variant", "status"))
    for pair in comparison["pairs"]:
        for i, row in enumerate(pair["variants"]):
            a_ms, b_ms = (f"{row[k]:.4g}" if row.get(k) is not None else "-" for k in ("a_ms", "b_ms"))
            out.add_row(pair["target"] if i == 0 else "", row["variant"], a_ms, b_ms, _ratio(row), row["status"])
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="*", type=Path, help="RUN_A RUN_B (default: the two newest runs with ch13 pairs).")
    p.add_argument("--artifacts-dir", type=Path, default=Path("artifacts"), help="Where run folders are (default artifacts).")
    p.add_argument("--threshold", type=float, default=None,
                   help="Relative change in median time that counts (default: each variant's run-to-run noise).")
    a = p.parse_args(argv)
    if len(a.runs) not in (0, 2):
        p.error("give two run folders, or none to take the two newest")
    runs = a.runs or chapter_runs(a.artifacts_dir)[:2][::-1]
    if len(runs) < 2:
        print(f"error: fewer than two timed runs with {CHAPTER} pairs under {a.artifacts_dir}", file=sys.stderr)
        return EXIT_USAGE
    try:
        comparison = chapter_comparison(runs[0], runs[1], a.threshold)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    console = Console(width=None if Console().is_terminal else 160)
    if comparison["environment_changes"]:
        console.print("environment changed: " + "; ".join(comparison["environment_changes"]), markup=False)
    console.print(table(comparison))
    return EXIT_SLOWER if any_slower(comparison) else 0


if __name__ == "__main__":
    sys.exit(main())
