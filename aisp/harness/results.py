"""Turning raw samples into a pair's result: summaries, speedup with its interval, verdict."""

from __future__ import annotations

from typing import Any

import numpy as np

from aisp.harness.execute import UNCHECKED
from aisp.harness.stats import (
    SLOWED_CAPPED_REL,
    SLOWED_REL,
    SLOWED_UNTRUSTED,
    grouped_ratio,
    paired_ratio,
    slowed_beside,
    summarize,
)
from aisp.harness.telemetry import THROTTLE_REASONS
from aisp.harness.timing import host_bound, idle_tail_overruled, left_on_streams, tail_overruled, unseen_work

VERDICT_ORDER = ("ok", "inconclusive", "ok-unchecked", "skipped", "slower", "regressed", "verify-failed",
                 "error", "timeout")
"""Least to most severe; a pair takes its worst variant's verdict. ``inconclusive``: the speedup's
95% interval holds 1 (no benefit shown); ``ok-unchecked``: verified (and ``ok`` or ``inconclusive``
by its timing), but the baseline declares no per-call ``inputs``, so an answer computed ahead
would pass: the mark is never hidden by a timing verdict."""
EXIT_CODES = {"ok": 0, "inconclusive": 0, "ok-unchecked": 0, "skipped": 0, "slower": 1, "usage": 2,
              "regressed": 3, "verify-failed": 4, "error": 5, "timeout": 5}
"""The CLI's exit code per verdict (the worst verdict of the run wins)."""
PASSED = (None, "pending", "ok")
"""Raw verdicts of a variant that nothing has failed (yet)."""
TIMED = ("ok", "inconclusive", "ok-unchecked", "slower")
"""Verdicts of a variant that was verified and timed against its baseline."""
SLOWER_THRESHOLD = 0.97
"""An optimized variant is ``slower`` when its speedup's 95% interval lies below 1 and the speedup
is under this: a statistical difference and a practical one."""
OUTSIDE_THRESHOLD = 64 * 2**20
"""A memory-headline variant whose setup and measured call left more than this many bytes allocated
outside torch's caching allocator beyond the baseline's (:func:`outside_excess`) has them counted in
the peak its memory ratio divides by."""


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
    empty = raw.get("empty_tail_ms") or []
    samples, idle_tails, probes = raw.get("samples_ms") or [], raw.get("idle_tail_ms") or [], raw.get("idle_probe_ms") or []
    leftover = raw.get("stream_leftover_us")
    sampled = None if tail_overruled(tails, samples, empty, idle_tails, probes, leftover) else unseen_work(
        tails, samples, empty_ms=empty)
    idle = None if idle_tail_overruled(idle_tails, probes, empty, tails, samples, leftover) else unseen_work(
        idle_tails, probes, "untimed calls from idle", empty)
    unseen = sampled or idle or left_on_streams(leftover, probes or samples)
    if unseen and raw.get("verdict") in (None, "pending", "ok"):
        result["verdict"], result["reason"] = "error", unseen
    result["host_bound"] = host_bound(raw.get("issue_samples_ms") or [], raw.get("samples_ms") or [],
                                      raw.get("spacer_ms") or 0.0) if tails else None
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


def _add_note(record: dict[str, Any], note: str) -> None:
    verification = record.get("verification") or {}
    record["verification"] = {**verification, "notes": [*verification.get("notes", []), note]}


def check_alone(base: dict[str, Any]) -> dict[str, float] | None:
    """Sets the baseline's median alone (``solo_ms``, before any other variant's setup; None: not
    timed alone) and ``interference``: :func:`aisp.harness.stats.slowed_beside` of its interleaved
    samples, with a note in its evidence notes; None (returned too) where noise explains the
    difference, or with --cold-start's samples (each variant in a process of its own: nothing beside it)."""
    solo = base.get("solo_samples_ms") or []
    base["solo_ms"] = float(np.median(solo)) if solo else None
    mixed = [] if base.get("sample_groups") else base.get("samples_ms") or []
    scale, fell = clock_scale(base)
    capped = power_capped(base, len(mixed))
    base["interference"] = slowed = slowed_beside([x * scale for x in solo], mixed,
                                                  SLOWED_CAPPED_REL if capped else SLOWED_REL)
    if not slowed and (fell or capped) and (raw := slowed_beside(solo, mixed)):
        why = [f"its SM clock fell ({fell})"] if fell else []
        if capped:
            why.append(f"it ran at a power or thermal cap ({capped})")
        _add_note(base, f"ran {raw['ratio']:.2f}x slower interleaved than alone ({raw['solo_ms']:.4g} against "
                        f"{raw['interleaved_ms']:.4g} ms), as {' and '.join(why)}: not named as a slowdown "
                        "the other variants caused")
    if slowed:
        slowed["solo_ms"] = base["solo_ms"]  # its ratio stays the scaled one: what the clock does not explain
        raw_ratio = slowed["interleaved_ms"] / slowed["solo_ms"]
        note = (f"ran {raw_ratio:.2f}x slower once the other variants were set up: {slowed['solo_ms']:.4g} ms "
                f"alone ({slowed['solo_samples']} samples, before their setup) against {slowed['interleaved_ms']:.4g} "
                "ms interleaved (medians); a variant may change state the baseline shares (L2 set-aside, memory, "
                "device settings, an object changed in place)")
        if fell:
            note += f"; {slowed['ratio']:.2f}x beyond its SM clock's fall ({fell})"
        if slowed["ratio"] >= SLOWED_UNTRUSTED:
            note += ("; host-bound: the host's load, which can differ between the two phases, may explain it"
                     if base.get("host_bound") else "; the speedups over it are not trusted")
        _add_note(base, note)
    return slowed


CAP_REASONS = tuple(THROTTLE_REASONS.values())
"""Throttle reasons (telemetry) under which the GPU manages its clock against a power or heat cap:
every reason telemetry counts as throttled, the platform's power brake included."""


def power_capped(base: dict[str, Any], samples: int) -> str | None:
    """How many of the ``samples`` interleaved samples ran throttled by a power or thermal cap
    (``throttled_samples``), in words, where more than half did; else None: the rule then allows
    SLOWED_CAPPED_REL instead of SLOWED_REL (:data:`aisp.harness.stats.SLOWED_CAPPED_REL`)."""
    capped = sum(1 for reasons in (base.get("throttled_samples") or {}).values()
                 if any(reason in CAP_REASONS for reason in reasons))
    return f"{capped} of {samples} samples" if samples and capped * 2 > samples else None


def clock_scale(base: dict[str, Any]) -> tuple[float, str | None]:
    """How much slower the samples alone would have run at the SM clock of the interleaved ones, were
    the call's time all clock cycles (the ratio of the clocks, where the clock fell: a GPU that warmed
    into its power cap between the phases; an 8192^3 bf16 matmul read 1.386 ms alone and 1.538
    interleaved on an H200), and the fall in words; (1.0, None) where it did not fall or was not read.
    A call bound by memory or the host slows less than its clock: scaled, the check can miss a
    slowdown, not invent one."""
    alone, timed = base.get("solo_clock_mhz") or [], base.get("timed_clock_mhz")
    if not alone or not timed or timed >= (solo := float(np.median(alone))):
        return 1.0, None
    return solo / timed, f"{solo:.0f} MHz alone, {timed:.0f} interleaved"


def point(record: dict[str, Any], headline: str) -> float | None:
    """What a memory or metric headline compares: the peak bytes, or the metric a "metric:<name>"
    headline names (lower is better, e.g. a decode step's p99 gap)."""
    if headline == "memory":
        return (record.get("memory") or {}).get("peak_bytes")
    return (record.get("metrics") or {}).get(headline.removeprefix("metric:"))


def outside_bytes(record: dict[str, Any]) -> int:
    """Bytes a variant's setup and its measured call left allocated outside torch's caching allocator
    (``setup_outside_bytes`` plus a positive ``run_outside_bytes``: device-wide readings, 0 where absent)."""
    memory = record.get("memory") or {}
    return (memory.get("setup_outside_bytes") or 0) + max(0, memory.get("run_outside_bytes") or 0)


def outside_excess(base: dict[str, Any], var: dict[str, Any], headline: str) -> int | None:
    """For a memory headline: the bytes ``var`` holds outside torch's caching allocator (symmetric memory,
    NCCL buffers, a library's own cudaMalloc) beyond its baseline's, where over OUTSIDE_THRESHOLD; they
    are not in ``peak_bytes``, so its memory ratio adds them to its peak. The baseline's figure is subtracted and
    the threshold absorbs small changes (lazily loaded modules, library handles); the one-time costs (the
    CUDA context, NCCL's communicators) fall in the first verification pass, before the kept setup measured."""
    if headline != "memory":
        return None
    excess = outside_bytes(var) - outside_bytes(base)
    return excess if excess > OUTSIDE_THRESHOLD else None


def _speedup(base: dict[str, Any], var: dict[str, Any], headline: str, cycle: int,
             outside: int = 0) -> dict[str, float] | None:
    """The variant's speedup over its baseline; ``outside``: bytes it holds outside torch's allocator
    beyond the baseline's, added to its peak (a memory headline)."""
    if headline != "time":
        b, o = point(base, headline), point(var, headline)
        o = o + outside if o else o
        return {"value": b / o, "low": b / o, "high": b / o} if b and o else None
    b, o = base.get("samples_ms"), var.get("samples_ms")
    if not b or not o:
        return None
    if base.get("sample_groups") and var.get("sample_groups"):
        return grouped_ratio(base["sample_groups"], var["sample_groups"]).to_dict()
    return (paired_ratio(b, o, cycle) if len(b) == len(o) else grouped_ratio([b], [o])).to_dict()


def unchecked(var: dict[str, Any]) -> bool:
    """Whether the variant was verified without per-call inputs to refill (its evidence says so)."""
    return UNCHECKED in (var.get("verification") or {}).get("notes", [])


def unchecked_reason(workload: dict[str, Any]) -> str:
    """What an unchecked pair's result says: the pair's own reason, or how to check it."""
    if workload.get("no_inputs_reason"):
        return f"unchecked: no per-call inputs by design: {workload['no_inputs_reason']}"
    return ("unchecked: the baseline declares no per-call `inputs`, so an answer computed ahead would pass; "
            "declare them, or state `inputs = ()` with the workload's `no_inputs_reason`")


def _timed_verdict(ratio: dict[str, float] | None) -> str:
    """``ok`` when the speedup's interval lies above 1 (or nothing was timed), ``slower`` when it
    lies below 1 and the speedup is under SLOWER_THRESHOLD, ``inconclusive`` otherwise."""
    if ratio is None or ratio["low"] > 1.0:
        return "ok"
    return "slower" if ratio["high"] < 1.0 and ratio["value"] < SLOWER_THRESHOLD else "inconclusive"


def _variant_verdict(var: dict[str, Any], untrusted: bool = False) -> str:
    """The variant's verdict; ``untrusted``: its baseline was slowed beside it (SLOWED_UNTRUSTED),
    so ``ok`` becomes ``inconclusive`` (``slower`` stays: the baseline it lost to was the slowed one)."""
    if var.get("verdict") not in PASSED:
        return var["verdict"]
    verdict = _timed_verdict(var.get("speedup"))
    verdict = "inconclusive" if untrusted and verdict == "ok" else verdict
    return "ok-unchecked" if verdict != "slower" and unchecked(var) else verdict


def _timed_reason(var: dict[str, Any]) -> str:
    """Why a timed variant is inconclusive or slower, from its speedup's interval."""
    s = var["speedup"]
    where = "holds 1" if var["verdict"] == "inconclusive" else "is below 1"
    where = "is above 1, over a baseline slowed beside it" if s["low"] > 1.0 else where
    if var.get("outside_excess_bytes"):
        where += f" (its peak counts {var['outside_excess_bytes'] / 2**20:.0f} MiB held outside torch's caching allocator)"
    return f"{var['name']}: {var['verdict']}: {s['value']:.2f}x [{s['low']:.2f}, {s['high']:.2f}] {where}"


def _best(variants: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The timed variant whose speedup's interval has the highest lower end (then the highest
    value): picking the largest point estimate would favour the luckiest draw of several."""
    ranked = [v for v in variants if v["verdict"] in TIMED and v.get("speedup")]
    return max(ranked, key=lambda v: (v["speedup"]["low"], v["speedup"]["value"])) if ranked else None


def assemble(pair: dict[str, Any], workload: dict[str, Any], raw: list[dict[str, Any]]) -> dict[str, Any]:
    """The result of one pair from its raw variant records (``raw[0]`` is the baseline)."""
    headline = workload.get("headline", "time")
    base = variant_result(raw[0], workload)
    slowed = check_alone(base)
    # a host-bound baseline's time follows the host, whose load (another pair's compile beside it) can
    # differ between the phase alone and the interleaved one: named in the notes, its speedups kept
    untrusted = bool(slowed) and slowed["ratio"] >= SLOWED_UNTRUSTED and headline == "time" and not base.get("host_bound")
    variants, cycle = [], sum(1 for r in raw if r.get("samples_ms"))  # the variants timed in turn
    for record in raw[1:]:
        var = variant_result(record, workload)
        timed = var.get("verdict") in PASSED and base.get("verdict") in PASSED
        var["outside_excess_bytes"] = excess = outside_excess(base, var, headline) if timed else None
        var["speedup"] = _speedup(base, var, headline, cycle, excess or 0) if timed else None
        if timed and headline.startswith("metric:") and var["speedup"] is None:
            var["verdict"], var["reason"] = "error", f"{headline}: not reported by both variants' metrics()"
        if excess:
            _add_note(var, f"{excess / 2**20:.0f} MiB more than the baseline allocated outside torch's caching "
                      "allocator (symmetric memory, NCCL, a library's own cudaMalloc): not in peak_bytes, "
                      "added to it for the memory ratio")
        var["verdict"] = _variant_verdict(var, untrusted)
        variants.append(var)
    base["verdict"] = "ok" if base.get("verdict") in (None, "pending") else base["verdict"]
    best = _best(variants)
    ran = [v["verdict"] for v in variants if v["verdict"] != "skipped"]
    verdict = max([base["verdict"], *ran], key=VERDICT_ORDER.index) if ran else "skipped"
    is_unchecked = any(unchecked(v) for v in variants)
    reasons = [f"{v['name']}: {v['reason']}" for v in [base, *variants] if v.get("reason")]
    reasons += [unchecked_reason(workload)] if is_unchecked else []
    reasons += [f"{base['name']}: ran {slowed['ratio']:.2f}x slower beside the other variants than alone: "
                "their speedups are not trusted (notes)"] if untrusted else []
    # the variants the pair's inconclusive or slower verdict comes from, first (they carry no reason)
    if verdict in ("inconclusive", "slower"):
        reasons[:0] = [_timed_reason(v) for v in variants if v["verdict"] == verdict]
    return {**pair, "verdict": verdict, "reason": "; ".join(reasons) or None, "workload": workload,
            "baseline": base, "variants": variants, "best": best["name"] if best else None,
            "speedup": best["speedup"] if best else None, "unchecked": is_unchecked}


def failed(pair: dict[str, Any], verdict: str, reason: str, workload: dict[str, Any] | None = None) -> dict[str, Any]:
    """A result for a pair that produced no measurements (skip, error, timeout)."""
    return {**pair, "verdict": verdict, "reason": reason, "workload": workload or {},
            "baseline": None, "variants": [], "best": None, "speedup": None}


def exit_code(results: list[dict[str, Any]]) -> int:
    """The run's exit code: that of its worst verdict."""
    return max((EXIT_CODES[r["verdict"]] for r in results), default=0)
