"""A run's results as JUnit XML, the format CI systems (GitHub, GitLab, Jenkins) render as tests.

A pair is a test case (``classname`` = its chapter, ``name`` = the pair). Its verdict decides the
element, by the exit code the verdict carries (:data:`aisp.harness.results.EXIT_CODES`), so a new
verdict needs no change here: ``skipped`` gives ``<skipped>``; code 5 (error, timeout) gives
``<error>``; any other non-zero code (slower, regressed, verify-failed) gives ``<failure>`` with the
verdict as its ``type`` and the reason as its message; code 0 (ok and the other passing verdicts)
passes. Every case carries its verdict and speedup as properties, and ``time`` is the seconds its
timed samples took.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from aisp.harness.artifacts import atomic_write_text
from aisp.harness.results import EXIT_CODES

ERROR_CODE = 5


def outcome(verdict: str) -> str:
    """``passed``, ``skipped``, ``failure`` or ``error`` for a verdict (an unknown one passes:
    its name still reaches the report as a property)."""
    if verdict == "skipped":
        return "skipped"
    code = EXIT_CODES.get(verdict, 0)
    return "passed" if code == 0 else "error" if code >= ERROR_CODE else "failure"


def _timed_seconds(result: dict[str, Any]) -> float:
    records = [result.get("baseline") or {}, *result.get("variants", [])]
    return sum(sum(r.get("samples_ms") or []) for r in records) / 1e3


def _properties(case: ET.Element, result: dict[str, Any]) -> None:
    props = ET.SubElement(case, "properties")
    speedup = result.get("speedup")
    values = {"verdict": result.get("verdict"), "best": result.get("best"),
              "speedup": f"{speedup['value']:.4g}" if speedup else None,
              "speedup_ci95": f"[{speedup['low']:.4g}, {speedup['high']:.4g}]" if speedup else None}
    for name, value in values.items():
        if value is not None:
            ET.SubElement(props, "property", name=name, value=str(value))


def testcase_element(result: dict[str, Any]) -> ET.Element:
    """One ``<testcase>`` for a pair result."""
    verdict = str(result.get("verdict"))
    case = ET.Element("testcase", classname=str(result.get("group")), name=str(result.get("name")),
                      time=f"{_timed_seconds(result):.3f}")
    _properties(case, result)
    kind = outcome(verdict)
    reason = result.get("reason") or verdict
    if kind != "passed":
        element = ET.SubElement(case, kind, message=f"{verdict}: {reason}"[:500])
        if kind != "skipped":
            element.set("type", verdict)
            element.text = reason
    return case


def junit_xml(results: list[dict[str, Any]], run_id: str) -> str:
    """The run as one ``<testsuites>`` document with one ``<testsuite>``."""
    cases = [testcase_element(r) for r in results]
    kinds = [outcome(str(r.get("verdict"))) for r in results]
    suite = ET.Element("testsuite", name=f"aisp {run_id}", tests=str(len(cases)),
                       failures=str(kinds.count("failure")), errors=str(kinds.count("error")),
                       skipped=str(kinds.count("skipped")), time=f"{sum(_timed_seconds(r) for r in results):.3f}")
    suite.extend(cases)
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(path: Path, results: list[dict[str, Any]], run_id: str) -> Path:
    """Write the JUnit XML of a run to ``path`` atomically."""
    atomic_write_text(path, junit_xml(results, run_id))
    return path
