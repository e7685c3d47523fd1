"""A check's result as text: one line per case, then one line for the whole check."""

from __future__ import annotations

from aisp.check.result import CaseResult, CheckResult

FOOTER = {"ok": "all cases match", "slower": "all cases match, but the speedup is under the bar",
          "verify-failed": "a case does not match", "error": "a call raised"}


def case_line(case: CaseResult) -> str:
    """``16x256 float32  ok   max abs err ..., rel L2 ...; reference ... ms, kernel ... ms, 1.23x [1.1, 1.4]``."""
    if case.verdict == "error":
        text = f"ERROR {case.reason}"
    elif case.verdict != "ok":
        text = f"FAIL [{case.check}] {case.reason}"
    else:
        text = f"ok   max abs err {case.max_abs_err:.3g}, rel L2 {case.rel_l2_err:.3g}"
        if case.speedup is not None:
            s = case.speedup
            text += (f"; reference {case.ref_ms:.4g} ms, kernel {case.fn_ms:.4g} ms, "
                     f"{s.value:.2f}x [{s.low:.2f}, {s.high:.2f}]")
    return f"{case.label:<28} {text}"


def render(result: CheckResult) -> str:
    """Every case's line and the footer (with the device and, when slower, why)."""
    lines = [case_line(c) for c in result.cases]
    footer = f"{FOOTER[result.verdict]} ({result.device})"
    if result.verdict == "slower":
        footer += f": {result.errors[-1]}"
    return "\n".join([*lines, footer])
