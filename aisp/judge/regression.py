"""Is a new result worse than its stored expectation by more than run-to-run noise explains?

Each pair is judged on several figures, each against the geometric mean of its stored history
(separate runs of ``--update-expectations``): the speedup (or memory ratio), the baseline's median
time, the optimized variant's median time and, for a memory headline, both peaks. A figure has
regressed only when all hold:

- it is worse than the reference by more than its limit: run-to-run noise (:mod:`run_noise`; an
  absolute time starts from a wider, weaker prior than a ratio, since nothing cancels its drift
  between processes), never under the pair's A/A half-width from ``aisp bench noise``; a memory figure's
  limit is a tolerance of 5% plus 1 MiB per peak instead;
- the new run's own 95% interval lies wholly on the worse side of the reference.

A pair is ``regressed`` when any figure is and, where the run re-ran it (``--confirm-runs``, the
result's ``reruns``), the re-runs confirm it: the geometric mean of a flagged figure over the re-runs
is again worse than the reference by more than the limit of a mean of that many runs. Otherwise it is
``ok`` with the unconfirmed flag in its detail. The speedup of a pair with a host-bound or host-heavy
variant (most of its timed call host code) is judged with the time prior: its interleaved variants no
longer cancel the host's drift.

A *host figure* (a host-bound or host-heavy variant's time; the headline ratio when the baseline or
best variant is one) moves with the host's speed, which the environment fingerprint cannot see: it is
judged only against the stored runs whose worker read an op dispatch cost within :data:`HOST_SPEED_REL`
of the new result's, and left out, with a clause in the detail, where none did. A result without that
reading is judged as before.

A result is ``not-compared`` (never ``regressed``) when its environment differs from the entry's
(``environment changed`` and each difference), it was measured on a busy host (``host busy`` and
the readings, :mod:`aisp.harness.host`), or every figure it has is a host figure left out (``host
speed differs``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from aisp.harness.environment import fingerprint_changes
from aisp.harness.names import HOST_RATE_LINKS
from aisp.harness.results import unchecked_reason
from aisp.judge.run_noise import (
    RATIO_PRIOR,
    TIME_PRIOR,
    Prior,
    geomean,
    log_limit,
    median_interval,
    memory_slack,
    noise_of,
)

MEASURED = ("ok", "inconclusive", "ok-unchecked", "slower", "regressed")
"""Verdicts whose measurements may be stored and judged (``ok-unchecked`` only with the pair's
``no_inputs_reason``: see :func:`refusal`)."""


@dataclass(frozen=True)
class Figure:
    """One judged number of a pair: its new value, the new run's best case and its history."""

    label: str
    value: float
    best_case: float
    """The end of the new run's 95% interval most favourable to it (the value itself for memory)."""
    history: tuple[float, ...]
    higher_is_better: bool
    limit: float
    """Log change the noise or tolerance explains."""
    unit: str


def _fmt(value: float, unit: str) -> str:
    return f"{value / 2**20:.1f} MiB" if unit == "B" else f"{value:.4g}{unit}"


def assess(fig: Figure) -> dict[str, Any]:
    """The figure against its reference: signed relative change, the limit in the worse
    direction, whether it regressed, and whether it left its limits either way (``shifted``)."""
    reference = geomean(fig.history)
    sign = -1 if fig.higher_is_better else 1
    worse = sign * math.log(fig.value / reference)
    wholly_worse = sign * (fig.best_case - reference) > 0
    change, limit = fig.value / reference - 1, math.expm1(sign * fig.limit)
    return {"figure": fig.label, "value": fig.value, "reference": reference, "runs": len(fig.history),
            "change": change, "limit": limit,
            "regressed": worse > fig.limit and wholly_worse, "shifted": abs(worse) > fig.limit,
            "text": f"{fig.label} {_fmt(fig.value, fig.unit)} vs {_fmt(reference, fig.unit)} over "
                    f"{len(fig.history)} run(s): {change:+.1%} (limit {limit:+.1%})"}


def _noise_limit(history: list[float], aa_rel: float | None, prior: Prior, runs: int = 1) -> float:
    return max(log_limit(noise_of(history, prior), len(history), runs), math.log1p(aa_rel or 0.0))


def _peak_limit(reference: float) -> float:
    return math.log((reference + memory_slack(reference)) / reference)


def _ratio_limit(history: list[dict[str, Any]]) -> float:
    base = [h["baseline_peak_bytes"] for h in history if h.get("baseline_peak_bytes")]
    opt = [h["optimized_peak_bytes"] for h in history if h.get("optimized_peak_bytes")]
    if not base or not opt:
        return math.inf  # a hand-edited entry without peaks: the ratio cannot be judged
    b, o = geomean(base), geomean(opt)
    low = b - memory_slack(b)
    return math.log(b / low) + _peak_limit(o) if low > 0 else math.inf


HOST_HEAVY_SHARE = 0.5
"""A CUDA variant timed from its call's start (no spacer) whose host issue time is at least half its
event time spends most of its measured time in host code, which interleaving does not cancel when
only one variant runs it. ch05:uint8_transfer's baseline (a CPU normalize, then one copy; issue
21.0 of 24.1 ms) read 29.0, 29.1, 24.1 and 29.2 ms on three H200 leases of 2026-11-29 while its
optimized variant held 0.80-0.81 ms: the speedup moved -17% and back, a false regression under the
ratio prior."""


def _host_heavy(variant: dict[str, Any]) -> bool:
    issue, events = (variant.get("issue_summary") or {}).get("median"), (variant.get("summary") or {}).get("median")
    if not variant.get("tail_summary") or variant.get("spacer_ms") or variant.get("syncs_inside"):
        return False  # a CPU variant, events behind a spacer (device work alone), or a call that waits
    return bool(issue and events and issue >= HOST_HEAVY_SHARE * events)


def host_timed(variant: dict[str, Any] | None) -> bool:
    """Whether the variant's time moves with the host: tagged host-bound (``host_bound`` set by the
    harness) or host-heavy (:data:`HOST_HEAVY_SHARE`)."""
    return bool(variant and (variant.get("host_bound") or _host_heavy(variant)))


def host_bound_names(result: dict[str, Any]) -> list[str]:
    """The baseline and best variant when tagged host-bound or host-heavy (:func:`host_timed`)."""
    best = next((v for v in result.get("variants", []) if v["name"] == result.get("best")), None)
    return [v["name"] for v in (result.get("baseline"), best) if host_timed(v)]


def host_rate_link(result: dict[str, Any]) -> bool:
    """Whether the pair's declared bytes cross a link whose rate the host sets (:data:`HOST_RATE_LINKS`):
    its speedup is then judged with the time prior, as a host-bound pair's is."""
    return (result.get("workload") or {}).get("link") in HOST_RATE_LINKS


def peak_method(result: dict[str, Any]) -> str | None:
    """How the result's peaks were counted (``memory.peak_method``; None before methods were stored)."""
    return ((result.get("baseline") or {}).get("memory") or {}).get("peak_method")


def same_peaks(history: list[dict[str, Any]], method: str | None) -> list[dict[str, Any]]:
    """The history runs whose peaks were counted as ``method`` counts them: only those judge a peak or a
    memory ratio (a new way of counting is not a regression)."""
    return [h for h in history if h.get("peak_method") == method]


def _ratio_label(headline: str) -> str:
    return "speedup" if headline == "time" else f"{headline} ratio"


def _speedup_figure(result: dict[str, Any], entry: dict[str, Any], runs: int) -> Figure | None:
    new, history = result["speedup"], entry["history"]
    headline = result["workload"].get("headline", "time")
    if headline == "memory":
        history = same_peaks(history, peak_method(result))
        if not history:
            return None
    values = [h["speedup"] for h in history]
    if headline != "time":
        return Figure(_ratio_label(headline), new["value"], new["value"], tuple(values), True,
                      _ratio_limit(history), "x")
    aa = (entry.get("noise") or {}).get("speedup_rel")
    prior = TIME_PRIOR if host_bound_names(result) or host_rate_link(result) else RATIO_PRIOR
    return Figure("speedup", new["value"], new["high"], tuple(values), True, _noise_limit(values, aa, prior, runs), "x")


def _variant_figures(variant: dict[str, Any] | None, role: str, history: list[dict[str, Any]],
                     entry: dict[str, Any], memory: bool, runs: int = 1, method: str | None = None) -> list[Figure]:
    """Median time (and, for a memory headline, peak) of the baseline or the stored best variant."""
    if not variant or variant.get("verdict") not in MEASURED or not variant.get("samples_ms"):
        return []
    times = [h[f"{role}_ms"] for h in history if h.get(f"{role}_ms")]
    low, _ = median_interval(variant["samples_ms"])
    aa = (entry.get("noise") or {}).get(f"{role}_rel")
    figures = [Figure(f"{variant['name']} time", variant["summary"]["median"], low, tuple(times), False,
                      _noise_limit(times, aa, TIME_PRIOR, runs), " ms")] if times else []
    peaks = [h[f"{role}_peak_bytes"] for h in same_peaks(history, method) if h.get(f"{role}_peak_bytes")]
    peak = (variant.get("memory") or {}).get("peak_bytes")
    if memory and peaks and peak:
        figures.append(Figure(f"{variant['name']} peak memory", peak, peak, tuple(peaks), False,
                              _peak_limit(geomean(peaks)), "B"))
    return figures


def _stored_best(result: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any] | None:
    """The result's variant of the entry's best (the optimized figures' variant)."""
    return next((v for v in result.get("variants", []) if v["name"] == entry.get("best")), None)


def _every_figure(result: dict[str, Any], entry: dict[str, Any], runs: int) -> list[Figure]:
    memory = result["workload"].get("headline") == "memory"
    same_best = [h for h in entry["history"] if h.get("best") == entry.get("best")]
    method = peak_method(result)
    ratio = _speedup_figure(result, entry, runs)
    return [*([ratio] if ratio else []),
            *_variant_figures(result.get("baseline"), "baseline", entry["history"], entry, memory, runs, method),
            *_variant_figures(_stored_best(result, entry), "optimized", same_best, entry, memory, runs, method)]


HOST_SPEED_REL = 0.25
"""How far (either way) the op dispatch cost a result's worker read (:func:`dispatch_us`) may be from a
stored run's for that run to judge the result's host figures (:func:`host_labels`). The environment
fingerprint cannot tell hosts apart that report one CPU model ("Intel(R) Xeon(R) Processor" on every
H200 lease, a VM), yet aisp peak's dispatch_torch_op read 3.45, 4.19 and 5.76 us on three of them. A
whole-book run on 2 x H200 (2026-11-30, code unchanged since the previous book) flagged five pairs,
every one host-bound or host-heavy, while its GPU-bound baselines read as before (median ratio 1.01):
ch05:uint8_transfer's baseline (a CPU normalize, then one copy) 50.32 ms against 26.76 stored (24.1-29.2
on three earlier leases; its speedup went up, 59x against 33x), ch17:moe_grouped_gemm's per-expert loop
20.74 against 14.14 ms, ch15:kv_cache_reuse's speedup 3.17x against 3.655x, and the decode-gap ratios of
ch15:chunked_prefill (2.94x against 3.35x) and ch17:prefill_decode_priority (3.88x against 5.11x); other
host-bound baselines of that book read 1.6-2.5x slower (ch01:cuda_graphs' eager launches 3.13 against
1.71 ms, ch02:small_copies 22.1 against 10.8, ch13:dataloader_default 290 against 145). Hosts within 25%
differ less than the time prior's limits (+46% for ch17:moe_grouped_gemm's baseline) allow for."""


def dispatch_us(result: dict[str, Any]) -> float | None:
    """The op dispatch cost (us) the result's worker read after its timed samples (``host.dispatch_us``);
    None for a result measured before the harness read it."""
    return (result.get("host") or {}).get("dispatch_us")


def similar_speed(a_us: float, b_us: float) -> bool:
    """Whether two op dispatch readings are within :data:`HOST_SPEED_REL` of each other, either way."""
    return abs(math.log(a_us / b_us)) <= math.log1p(HOST_SPEED_REL)


def same_host_speed(history: list[dict[str, Any]], probe: float) -> list[dict[str, Any]]:
    """The history runs whose ``host_dispatch_us`` is of a :func:`similar_speed` to ``probe``."""
    return [h for h in history if h.get("host_dispatch_us") and similar_speed(h["host_dispatch_us"], probe)]


def host_labels(result: dict[str, Any], entry: dict[str, Any]) -> set[str]:
    """The labels of the result's *host figures*, those that move with the host's speed: the baseline's
    time when it is host-bound or host-heavy, the stored best variant's time when it is, and the
    headline ratio (speedup or metric; not a memory ratio) when either of the result's is."""
    labels = {f"{v['name']} time" for v in (result.get("baseline"), _stored_best(result, entry)) if host_timed(v)}
    headline = result["workload"].get("headline", "time")
    if host_bound_names(result) and headline != "memory":
        labels.add(_ratio_label(headline))
    return labels


def _host_gap(probe: float, history: list[dict[str, Any]], left_out: list[str], near: bool) -> str:
    """The clause that names the host figures left out, and why (``near``: some stored runs are at this
    host's speed, but none of them holds these figures)."""
    head = f"host figures not judged ({', '.join(left_out)}): dispatch {probe:.1f} us here"
    stored = sorted(h["host_dispatch_us"] for h in history if h.get("host_dispatch_us"))
    if not stored:
        return f"{head}, not read in the stored runs"
    span = f"{stored[0]:.1f}" if stored[0] == stored[-1] else f"{stored[0]:.1f}-{stored[-1]:.1f}"
    return f"{head} against {span} us in the stored runs (no stored run within {HOST_SPEED_REL:.0%}" \
           f"{' holds them' if near else ''})"


def judged_figures(result: dict[str, Any], entry: dict[str, Any], runs: int = 1) -> tuple[list[Figure], str | None]:
    """The figures of :func:`figures`, and the clause naming the host figures it left out (None if none)."""
    every, probe = _every_figure(result, entry, runs), dispatch_us(result)
    host = host_labels(result, entry)
    if probe is None or not any(f.label in host for f in every):
        return every, None  # a result without the probe is judged as before it existed
    near = same_host_speed(entry["history"], probe)
    matched = {f.label: f for f in _every_figure(result, {**entry, "history": near}, runs)} if near else {}
    left_out = [f.label for f in every if f.label in host and f.label not in matched]
    kept = [matched[f.label] if f.label in host else f for f in every if f.label not in left_out]
    return kept, _host_gap(probe, entry["history"], left_out, bool(near)) if left_out else None


def figures(result: dict[str, Any], entry: dict[str, Any], runs: int = 1) -> list[Figure]:
    """Every figure of the result that the entry's history can judge; with ``runs``, the limits
    are those of a mean of that many new runs. A host figure (:func:`host_labels`) of a result that
    read the host's speed is judged against the runs of a host of similar speed only
    (:data:`HOST_SPEED_REL`), and left out where the history holds none."""
    return judged_figures(result, entry, runs)[0]


def host_busy(result: dict[str, Any]) -> str | None:
    """``host busy: <why>`` when the result was measured on a busy host (its ``host`` readings), else None."""
    reasons = (result.get("host") or {}).get("busy") or []
    return f"host busy: {'; '.join(reasons)}" if reasons else None


def refusal(result: dict[str, Any]) -> str | None:
    """Why a measured result may be neither stored nor judged, or None: a pair whose baseline
    declares no per-call inputs, unless it states why (the workload's ``no_inputs_reason``), a
    result measured in a reused worker after other pairs, or one measured on a busy host."""
    workload = result.get("workload") or {}
    if result.get("unchecked") and not workload.get("no_inputs_reason"):
        return unchecked_reason(workload)
    return reused_worker(result) or host_busy(result)


def reused_worker(result: dict[str, Any]) -> str | None:
    """Why a result from a reused worker (--reuse-workers, after other pairs in the same process) is
    not held against expectations taken in fresh processes, or None. On an H200 (2026-11-28, beside
    profiling on the host's other GPUs) ch01:preallocated_buffers ran 35-40% slower there than in
    fresh processes (both variants; the speedup held) and its baseline was flagged as a regression."""
    earlier = ((result.get("placement") or {}).get("reused_worker") or {}).get("earlier_pairs") or 0
    if earlier < 1:
        return None
    return (f"reused worker: measured after {earlier} other pair(s) in the same process; expectations "
            "come from fresh processes")


def comparable(result: dict[str, Any]) -> bool:
    """A measured result with a speedup that may be stored and judged."""
    return result["verdict"] in MEASURED and bool(result.get("speedup")) and refusal(result) is None


def confirm(flagged: list[str], reruns: list[dict[str, Any]], entry: dict[str, Any]) -> dict[str, Any]:
    """Whether the re-runs confirm the figures a run flagged: a flagged figure's geometric mean over
    the comparable re-runs is worse than the reference beyond the limit of a mean of that many runs.
    Re-runs that failed or ran on a busy host do not count; with none left nothing is confirmed. Each
    re-run's figures are its own (:func:`figures`: a host figure judged at the re-run's host speed);
    a flagged figure some re-run could not judge is not confirmed."""
    measured = [r for r in reruns if comparable(r)]
    if not measured:
        return {"confirmed": False, "runs": 0, "detail": f"none of {len(reruns)} re-run(s) could be compared"}
    pooled, unjudged = [], []
    for label in flagged:
        each = [f for r in measured for f in figures(r, entry, len(measured)) if f.label == label]
        if len(each) == len(measured):
            value = geomean([f.value for f in each])
            pooled.append(assess(replace(each[0], value=value, best_case=value)))
        else:  # a host figure of a re-run whose own probe read another host speed
            unjudged.append(label)
    held = [p["text"] for p in pooled if p["regressed"]]
    texts = held or [p["text"] for p in pooled]
    detail = "; ".join([*texts, f"{', '.join(unjudged)} not judged in them"] if unjudged else texts)
    return {"confirmed": bool(held), "runs": len(measured), "detail": f"mean of {len(measured)} re-run(s): {detail}"}


def _not_compared(why: str, detail: str, **extra: Any) -> dict[str, Any]:
    return {"status": "not-compared", "why": why, "detail": f"{why}: {detail}" if detail else why, **extra}


def judge_entry(result: dict[str, Any], entry: dict[str, Any] | None, pair_env: dict[str, Any]) -> dict[str, Any]:
    """How the result compares with its stored entry: new, ok, regressed, or not-compared (its
    ``why``: not measured, unchecked, reused worker, host busy, environment changed, host speed differs
    (every figure a host figure with no stored run at this host's speed), re-runs not comparable)."""
    if not comparable(result):
        busy, reused = host_busy(result), reused_worker(result)
        if reused and result["verdict"] in MEASURED:
            return _not_compared("reused worker", reused.removeprefix("reused worker: "))
        if busy and result["verdict"] in MEASURED:
            return _not_compared("host busy", busy.removeprefix("host busy: "), host=result.get("host"))
        return _not_compared("not judged", refusal(result) or f"verdict {result['verdict']}")
    if entry is None or not entry.get("history"):
        return {"status": "new", "detail": "no stored expectation for this pair"}
    changes = fingerprint_changes(entry.get("environment") or {}, pair_env)
    if changes:
        return _not_compared("environment changed", "; ".join(changes), changes=changes)
    kept, gap = judged_figures(result, entry)
    if gap and not kept:
        return _not_compared("host speed differs", gap)
    judged = [assess(f) for f in kept]
    worse = [j for j in judged if j["regressed"]]
    detail = "; ".join(j["text"] for j in worse or judged)
    gap = f"; {gap}" if gap else ""
    if not worse or result.get("reruns") is None:
        return {"status": "regressed" if worse else "ok", "detail": detail + gap, "figures": judged}
    check = confirm([j["figure"] for j in worse], result["reruns"], entry)
    if check["confirmed"]:
        return {"status": "regressed", "detail": f"{detail}; confirmed by the {check['detail']}{gap}",
                "figures": judged, "confirmation": check}
    if not check["runs"]:
        return _not_compared("not confirmed", f"flagged ({detail}) but {check['detail']}{gap}", figures=judged,
                             confirmation=check)
    return {"status": "ok", "detail": f"flagged ({detail}), not confirmed by the {check['detail']}{gap}",
            "figures": judged, "confirmation": check}


def history_run(entry: dict[str, Any]) -> dict[str, Any]:
    """What one run adds to an entry's history: its figures, date, commit and host speed."""
    memory, provenance = entry.get("memory") or {}, entry.get("provenance") or {}
    return {"date": provenance.get("date"), "commit": provenance.get("commit"),
            "diff_sha256": provenance.get("diff_sha256"), "run": provenance.get("run"),
            "speedup": entry["speedup"]["value"], "best": entry.get("best"),
            "baseline_ms": entry.get("baseline_ms"), "optimized_ms": entry.get("optimized_ms"),
            "baseline_peak_bytes": memory.get("baseline_peak_bytes"),
            "optimized_peak_bytes": memory.get("optimized_peak_bytes"), "peak_method": memory.get("peak_method"),
            "host_dispatch_us": entry.get("host_dispatch_us")}


def level_change(result: dict[str, Any], entry: dict[str, Any] | None, pair_env: dict[str, Any]) -> str:
    """How storing the result moves the entry's level: ``kept`` (same environment, every figure
    within its limit, or a flag its re-runs did not confirm), ``changed`` (no history, another
    environment, or a shift its re-runs confirmed: a new history starts) or ``unconfirmed`` (a
    figure left its limits and nothing re-ran to confirm it: one run, perhaps an outlier)."""
    if not entry or not entry.get("history") or fingerprint_changes(entry.get("environment") or {}, pair_env):
        return "changed"
    shifted = [a["figure"] for a in map(assess, figures(result, entry)) if a["shifted"]]
    if not shifted:
        return "kept"
    check = confirm(shifted, result["reruns"], entry) if result.get("reruns") else None
    if check is None or not check["runs"]:
        return "unconfirmed"
    return "changed" if check["confirmed"] else "kept"  # a flag its re-runs cleared: an outlier
