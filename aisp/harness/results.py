"""Turning raw samples into a pair's result: summaries, speedup with its interval, verdict."""

from __future__ import annotations

from typing import Any

from aisp.harness.stats import grouped_ratio, paired_ratio, summarize
from aisp.harness.timing import host_bound, unseen_work

VERDICT_ORDER = ("ok", "skipped", "slower", "regressed", "verify-failed", "error", "timeout")
"""Least to most severe; a pair takes its worst variant's verdict."""
EXIT_CODES = {"ok": 0, "skipped": 0, "slower": 1, "usage": 2, "regressed": 3, "verify-failed": 4,
              "error": 5, "timeout": 5}
"""The CLI's exit code per verdict (the worst verdict of the run wins)."""
SLOWER_THRESHOLD = 0.97
"""An optimized variant is ``slower`` when its speedup's 95% interval lies below 1 and the speedup
is under this: a statistical difference and a practical one."""


def throughput(workload: dict[str, Any], median_ms: float) -> dict[str, float]:
    """TFLOP/s, GB/s and items/s at the median time, for what the workload declares."""
    rates = {"tflops": ("flops", 1e12), "gbps": ("bytes", 1e9), "items_per_s": ("items", 1.0)}
    return {key: workload[field] / (median_ms / 1e3) / scale for key, (field, scale) in rates.items()
            if workload.get(field)}


def variant_result(raw: dict[str, Any], workload: dict[str, Any]) -> dict[str, Any]:
    """A raw variant record plus its summaries (events, host window, issue time, sync tail) and
    throughput (when it has samples); an ``error`` when a device-wide sync after its end events
    still waited (work they did not see), in its samples or its untimed calls from idle; ``host_bound`` with its figures (CUDA) when its device
    work barely exceeds the host's time to issue it, else None."""
    result = dict(raw)
    tails = raw.get("tail_samples_ms") or []
    unseen = unseen_work(tails, raw.get("samples_ms") or []) or unseen_work(
        raw.get("idle_tail_ms") or [], raw.get("idle_probe_ms") or [], "untimed calls from idle")
    if unseen and raw.get("verdict") in (None, "pending", "ok"):
        result["verdict"], result["reason"] = "error", unseen
    result["host_bound"] = host_bound(raw.get("issue_samples_ms") or [], raw.get("samples_ms") or []) if tails else None
    if raw.get("samples_ms"):
        summary = summarize(raw["samples_ms"])
        result["summary"] = summary.to_dict()
        for key in ("host", "issue", "tail"):
            samples = raw.get(f"{key}_samples_ms")
            result[f"{key}_summary"] = summarize(samples).to_dict() if samples else None
        result["throughput"] = throughput(workload, summary.median)
    else:
        result["summary"] = None
    return result


def point(record: dict[str, Any], headline: str) -> float | None:
    """What a memory or metric headline compares: the peak bytes, or the metric a "metric:<name>"
    headline names (lower is better, e.g. a decode step's p99 gap)."""
    if headline == "memory":
        return (record.get("memory") or {}).get("peak_bytes")
    return (record.get("metrics") or {}).get(headline.removeprefix("metric:"))


def _speedup(base: dict[str, Any], var: dict[str, Any], headline: str, cycle: int) -> dict[str, float] | None:
    if headline != "time":
        b, o = point(base, headline), point(var, headline)
        return {"value": b / o, "low": b / o, "high": b / o} if b and o else None
    b, o = base.get("samples_ms"), var.get("samples_ms")
    if not b or not o:
        return None
    if base.get("sample_groups") and var.get("sample_groups"):
        return grouped_ratio(base["sample_groups"], var["sample_groups"]).to_dict()
    return (paired_ratio(b, o, cycle) if len(b) == len(o) else grouped_ratio([b], [o])).to_dict()


def _variant_verdict(var: dict[str, Any]) -> str:
    if var.get("verdict") not in (None, "pending", "ok"):
        return var["verdict"]
    ratio = var.get("speedup")
    if ratio is None:
        return "ok"
    return "slower" if ratio["high"] < 1.0 and ratio["value"] < SLOWER_THRESHOLD else "ok"


def assemble(pair: dict[str, Any], workload: dict[str, Any], raw: list[dict[str, Any]]) -> dict[str, Any]:
    """The result of one pair from its raw variant records (``raw[0]`` is the baseline)."""
    headline = workload.get("headline", "time")
    base = variant_result(raw[0], workload)
    variants, cycle = [], sum(1 for r in raw if r.get("samples_ms"))  # the variants timed in turn
    for record in raw[1:]:
        var = variant_result(record, workload)
        timed = var.get("verdict") in (None, "pending", "ok") and base.get("verdict") in (None, "pending", "ok")
        var["speedup"] = _speedup(base, var, headline, cycle) if timed else None
        if timed and headline.startswith("metric:") and var["speedup"] is None:
            var["verdict"], var["reason"] = "error", f"{headline}: not reported by both variants' metrics()"
        var["verdict"] = _variant_verdict(var)
        variants.append(var)
    base["verdict"] = "ok" if base.get("verdict") in (None, "pending") else base["verdict"]
    ranked = [v for v in variants if v["verdict"] in ("ok", "slower") and v.get("speedup")]
    best = max(ranked, key=lambda v: v["speedup"]["value"]) if ranked else None
    ran = [v["verdict"] for v in variants if v["verdict"] != "skipped"]
    verdict = max([base["verdict"], *ran], key=VERDICT_ORDER.index) if ran else "skipped"
    reasons = [f"{v['name']}: {v['reason']}" for v in [base, *variants] if v.get("reason")]
    return {**pair, "verdict": verdict, "reason": "; ".join(reasons) or None, "workload": workload,
            "baseline": base, "variants": variants, "best": best["name"] if best else None,
            "speedup": best["speedup"] if best else None}


def failed(pair: dict[str, Any], verdict: str, reason: str, workload: dict[str, Any] | None = None) -> dict[str, Any]:
    """A result for a pair that produced no measurements (skip, error, timeout)."""
    return {**pair, "verdict": verdict, "reason": reason, "workload": workload or {},
            "baseline": None, "variants": [], "best": None, "speedup": None}


def exit_code(results: list[dict[str, Any]]) -> int:
    """The run's exit code: that of its worst verdict."""
    return max((EXIT_CODES[r["verdict"]] for r in results), default=0)
