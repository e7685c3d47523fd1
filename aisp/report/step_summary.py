"""A run as a Markdown step summary for CI (GitHub Actions shows ``$GITHUB_STEP_SUMMARY`` on the
run's page): counts per verdict, then one row per pair with its speedup interval and reason.

Written where ``--step-summary PATH`` says, else appended to ``$GITHUB_STEP_SUMMARY`` when that is
set (GitHub gives each step one file that several writers may append to).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aisp.harness.artifacts import atomic_write_text
from aisp.report.junit import write_junit

REASON_CHARS = 160
"""A reason longer than this is cut in the table (the full text is in the run's JSON)."""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _speedup(result: dict[str, Any]) -> str:
    ratio = result.get("speedup")
    return f"{ratio['value']:.2f}x [{ratio['low']:.2f}, {ratio['high']:.2f}]" if ratio else ""


def markdown(results: list[dict[str, Any]], run_id: str, hardware_key: str) -> str:
    """The summary: a heading, verdict counts, a pair table."""
    counts = Counter(str(r.get("verdict")) for r in results)
    lines = [f"### aisp run {run_id} ({hardware_key})", "",
             ", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items())) or "no pairs", "",
             "| pair | speedup [95% CI] | verdict | reason |", "|---|---|---|---|"]
    for r in results:
        reason = r.get("reason") or ""
        reason = reason if len(reason) <= REASON_CHARS else reason[:REASON_CHARS - 1] + "…"
        lines.append(f"| {_cell(str(r.get('target')))} | {_speedup(r)} | {_cell(str(r.get('verdict')))} "
                     f"| {_cell(reason)} |")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class CiOutputs:
    """Where a run writes its CI files besides its artifacts (None: not written)."""

    junit_xml: Path | None = None
    """JUnit XML of the run (``--junit-xml``)."""
    step_summary: Path | None = None
    """Markdown summary written here (``--step-summary``), replacing the file."""
    append_summary: Path | None = None
    """Markdown summary appended here (``$GITHUB_STEP_SUMMARY``)."""

    @classmethod
    def from_cli(cls, junit_xml: Path | None, step_summary: Path | None,
                 environ: Mapping[str, str] = os.environ) -> CiOutputs:
        """The explicit paths, and ``$GITHUB_STEP_SUMMARY`` when no ``--step-summary`` is given."""
        github = environ.get("GITHUB_STEP_SUMMARY")
        return cls(junit_xml, step_summary, Path(github) if github and step_summary is None else None)

    def write(self, results: list[dict[str, Any]], run_id: str, hardware_key: str) -> None:
        """Write each file this asks for."""
        if self.junit_xml:
            write_junit(self.junit_xml, results, run_id)
        text = markdown(results, run_id, hardware_key)
        if self.step_summary:
            atomic_write_text(self.step_summary, text)
        if self.append_summary:
            with self.append_summary.open("a") as handle:
                handle.write(text)
