"""What ``aisp.check`` returns: one frozen record per case (shapes x dtype) and the whole check's
verdict, with a JSON form (``schema_version`` 1) for the CLI, the pytest plugin and the MCP server."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from aisp.harness.stats import Ratio

SCHEMA_VERSION = 1
VERDICT_ORDER = ("ok", "slower", "verify-failed", "error")
"""Best to worst; the check's verdict is its worst case's."""
EXIT_CODES = {"ok": 0, "slower": 1, "verify-failed": 4, "error": 5}
"""Exit code per verdict (2 is bad usage, decided before any case runs)."""


@dataclass(frozen=True)
class CaseResult:
    """One case: the input shapes and dtype, what verification found, and the timing."""

    shapes: tuple[tuple[int, ...], ...]
    dtype: str
    verdict: str
    """ok, verify-failed (a check fired: mismatch, cached answer, precision, aliasing, NaN, unjoined
    stream) or error (the kernel or the reference raised)."""
    reason: str = ""
    check: str = ""
    """Which check fired: mismatch, cached-answer, precision, aliasing, nan, mutated-input,
    unjoined-stream, raised."""
    max_abs_err: float | None = None
    rel_l2_err: float | None = None
    checks: tuple[str, ...] = ()
    """The checks this case passed."""
    ref_ms: float | None = None
    fn_ms: float | None = None
    speedup: Ratio | None = None
    """Reference time / kernel time: median of per-iteration ratios with its 95% interval."""

    @property
    def label(self) -> str:
        return f"{','.join('x'.join(map(str, s)) or 'scalar' for s in self.shapes)} {self.dtype}"


@dataclass(frozen=True)
class CheckResult:
    """A whole check: the worst case's verdict, the headline speedup and every case."""

    verdict: str
    cases: tuple[CaseResult, ...]
    device: str
    speedup: Ratio | None = None
    """The first case's (the declared sizes, first dtype): random and edge sizes are there to find
    bugs, each timed on its own in ``cases``. None when it was not timed or did not match."""
    errors: tuple[str, ...] = ()
    """One line per failed case: its label and why."""

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        for case, raw in zip(self.cases, doc["cases"], strict=True):
            raw["label"] = case.label
        return {"schema_version": SCHEMA_VERSION, "exit_code": self.exit_code, **doc}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def worst(verdicts: list[str]) -> str:
    """The worst of the verdicts (ok when there are none)."""
    return max(verdicts, key=VERDICT_ORDER.index, default="ok")


def summarize(cases: list[CaseResult], device: str, min_speedup: float | None = None) -> CheckResult:
    """The check's result: ``slower`` when every case matched but the headline interval's low end is
    under ``min_speedup``."""
    headline = cases[0].speedup if cases else None
    verdict = worst([c.verdict for c in cases])
    if verdict == "ok" and min_speedup is not None and (headline is None or headline.low < min_speedup):
        verdict = "slower"
    errors = tuple(f"{c.label}: {c.reason}" for c in cases if c.verdict != "ok")
    if verdict == "slower":
        shown = f"{headline.value:.2f}x [{headline.low:.2f}, {headline.high:.2f}]" if headline else "not timed"
        errors += (f"speedup {shown}: its interval's low end is under {min_speedup:g}",)
    return CheckResult(verdict, tuple(cases), device, headline, errors)
