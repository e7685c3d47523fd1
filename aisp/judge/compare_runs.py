"""Compare two run folders pair by pair: is run B faster, slower or the same as run A?

Each variant (the baseline and each optimized file, matched by name) is compared on its raw
samples: the ratio of medians B/A with a bootstrap 95% interval, and a two-sided Mann-Whitney U
p-value. Both only see the noise inside each run; separate runs of identical code differ by more
(clocks, temperature, placement), so a change must also exceed a run-to-run threshold: the
``--threshold`` given, else the variant's own run-to-run noise from the stored expectations'
history (:mod:`aisp.judge.run_noise`), else a default of 17.6% that identical code at the
run-to-run noise seen on the H200 exceeds in under 1% of comparisons.

- ``faster`` / ``slower``: the interval excludes 1, |change| > threshold and p < 0.01;
- ``same``: the interval lies inside [1 - threshold, 1 + threshold];
- ``ambiguous``: anything else (too few samples or too much noise to tell).

A pair takes the worst status of its compared optimized variants -- a baseline that got slower or
faster shows on its own row but does not make the pair slower -- and is ``slower`` too when its
headline (the speedup, or memory ratio, of its best variant) got worse: B's interval entirely below
A's and lower by more than the threshold. Only a ``slower`` pair makes ``aisp bench compare`` exit 3.
A pair (or variant) in one run only is ``not in run A`` / ``not in run B``.

A different environment fingerprint (GPU, driver, CUDA, torch) or a missing manifest is reported as
"environment changed" and flags every row. Where the two runs' workers read op dispatch costs further
apart than :data:`aisp.judge.regression.HOST_SPEED_REL` (hosts of one CPU model can differ 1.7x), a
host-bound or host-heavy variant is ``not-compared`` ("host speed differs") and a headline of a pair
with one cannot fail the comparison, as the expectations' judge leaves out those figures.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scipy.stats import mannwhitneyu

from aisp.harness.artifacts import read_json
from aisp.harness.environment import fingerprint, fingerprint_changes
from aisp.harness.stats import grouped_ratio
from aisp.judge.expectations import stored_times
from aisp.judge.regression import HOST_SPEED_REL, dispatch_us, host_bound_names, host_timed, similar_speed
from aisp.judge.run_noise import log_limit, noise_of

ALPHA = 0.01
"""A change needs a Mann-Whitney p-value below this."""
STATUS_ORDER = ("same", "faster", "ambiguous", "slower")
"""Least to most worrying; a pair in both runs takes its worst compared optimized variant's status."""
NOT_IN_A, NOT_IN_B = "not in run A", "not in run B"
"""A pair or variant present in one run only (not selected, added or removed: the runs cannot tell)."""


def classify(ratio: dict[str, float], p_value: float, threshold: float) -> str:
    """faster, slower, same or ambiguous from the time ratio B/A, its interval and the p-value."""
    significant = p_value < ALPHA
    if ratio["low"] > 1 and ratio["value"] - 1 > threshold and significant:
        return "slower"
    if ratio["high"] < 1 and 1 - ratio["value"] > threshold and significant:
        return "faster"
    if 1 - threshold <= ratio["low"] and ratio["high"] <= 1 + threshold:
        return "same"
    return "ambiguous"


def compare_samples(a: Sequence[float], b: Sequence[float], threshold: float) -> dict[str, Any]:
    """Run B's samples against run A's: time ratio B/A [95% CI], p-value, change and status."""
    ratio = grouped_ratio([b], [a]).to_dict()
    p_value = float(mannwhitneyu(b, a, alternative="two-sided").pvalue)
    return {"ratio": ratio, "p_value": p_value, "change": ratio["value"] - 1,
            "status": classify(ratio, p_value, threshold)}


def _median(variant: dict[str, Any] | None) -> float | None:
    summary = (variant or {}).get("summary")
    return summary["median"] if summary else None


def run_to_run_threshold(history_ms: list[float]) -> float:
    """Relative change of one run against another that run-to-run noise explains, from the
    variant's stored medians (separate runs); the default without history."""
    return math.expm1(log_limit(noise_of(history_ms), 1))


def compare_variant(name: str, a: dict[str, Any] | None, b: dict[str, Any] | None,
                    threshold: float, role: str = "optimized") -> dict[str, Any]:
    """One variant (``role``: baseline or optimized) of one pair in both runs (``None`` where a run lacks it)."""
    row: dict[str, Any] = {"variant": name, "role": role, "a_ms": _median(a), "b_ms": _median(b),
                           "threshold": threshold}
    if a is None or b is None:
        return {**row, "status": NOT_IN_A if a is None else NOT_IN_B}
    missing = [f"{run} has no samples (verdict {v.get('verdict')})"
               for run, v in (("A", a), ("B", b)) if not v.get("samples_ms")]
    if missing:
        return {**row, "status": "not-compared", "reason": "; ".join(missing)}
    return {**row, **compare_samples(a["samples_ms"], b["samples_ms"], threshold)}


def _variants(result: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    if result is None:
        return {}
    found = [result.get("baseline"), *result.get("variants", [])]
    return {v["name"]: v for v in found if v}


def worst_status(statuses: Sequence[str]) -> str:
    """The most worrying of the compared statuses; ``not-compared`` when no variant was compared
    (a variant in one run only or without samples shows on its own row, not in the pair's status)."""
    compared = [s for s in statuses if s in STATUS_ORDER]
    return max(compared, key=STATUS_ORDER.index) if compared else "not-compared"


def headline_worse(speedup_a: dict[str, float] | None, speedup_b: dict[str, float] | None,
                   threshold: float) -> bool:
    """Whether the pair's headline (speedup or memory ratio) got worse: B's interval entirely below
    A's, and B's value lower than A's by more than ``threshold``."""
    if not speedup_a or not speedup_b:
        return False
    return speedup_b["high"] < speedup_a["low"] and speedup_b["value"] < speedup_a["value"] * (1 - threshold)


def _baseline_names(*results: dict[str, Any] | None) -> set[str]:
    return {r["baseline"]["name"] for r in results if r and r.get("baseline")}


def host_speed_gap(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    """Why the pair's host-bound figures of run B are not held against run A's: their workers' op dispatch
    costs (the results' ``host.dispatch_us``) are not of a similar speed; None where they are or either
    run did not read one."""
    da, db = dispatch_us(a), dispatch_us(b)
    if not da or not db or similar_speed(da, db):
        return None
    return f"host speed differs: dispatch {db:.1f} us in run B against {da:.1f} us in run A (over {HOST_SPEED_REL:.0%})"


def _host_rows(rows: list[dict[str, Any]], a: dict[str, Any], b: dict[str, Any], gap: str) -> list[dict[str, Any]]:
    """The rows with each host-bound or host-heavy variant (in either run) not compared, for ``gap``."""
    host = {v["name"] for r in (a, b) for v in (r.get("baseline"), *r.get("variants", [])) if host_timed(v)}
    return [{**r, "status": "not-compared", "reason": gap} if r["variant"] in host and r["status"] in STATUS_ORDER
            else r for r in rows]


def compare_pair(target: str, a: dict[str, Any] | None, b: dict[str, Any] | None,
                 threshold: float | None = None, history_ms: dict[str, list[float]] | None = None) -> dict[str, Any]:
    """Every variant of a pair; ``not in run A``/``not in run B`` when the pair is in one run only.

    Without a ``threshold`` each variant's comes from its stored medians in ``history_ms`` (the
    headline's from the default)."""
    va, vb = _variants(a), _variants(b)
    names = list(va) + [n for n in vb if n not in va]
    history_ms, baselines = history_ms or {}, _baseline_names(a, b)
    rows = [compare_variant(n, va.get(n), vb.get(n), threshold or run_to_run_threshold(history_ms.get(n, [])),
                            "baseline" if n in baselines else "optimized") for n in names]
    speedup_a, speedup_b = (a or {}).get("speedup"), (b or {}).get("speedup")
    worse = headline_worse(speedup_a, speedup_b, threshold or run_to_run_threshold([]))
    gap = host_speed_gap(a, b) if a and b else None
    if gap:
        rows = _host_rows(rows, a, b, gap)
        worse = worse and not (host_bound_names(a) or host_bound_names(b))
    if a is None or b is None:
        status = NOT_IN_A if a is None else NOT_IN_B
    else:
        status = "slower" if worse else worst_status([r["status"] for r in rows if r["role"] == "optimized"])
    return {"target": target, "status": status, "headline_worse": worse, "variants": rows,
            "speedup_a": speedup_a, "speedup_b": speedup_b}


def _results(summary: dict[str, Any], run_dir: Path) -> dict[str, dict[str, Any]]:
    results = summary.get("results")
    if not isinstance(results, list) or not all(isinstance(r, dict) and "target" in r for r in results):
        raise ValueError(f"{run_dir / 'summary.json'}: malformed run summary (no 'results' list of pairs)")
    return {r["target"]: r for r in results}


def load(run_dir: Path) -> tuple[dict[str, dict[str, Any]], dict[str, Any] | None]:
    """(results by target, manifest or None) of a run folder; clear errors when it is unreadable."""
    if not run_dir.is_dir():
        raise FileNotFoundError(f"{run_dir}: no such run folder")
    manifest = run_dir / "manifest.json"
    return _results(read_json(run_dir / "summary.json"), run_dir), (read_json(manifest) if manifest.exists() else None)


def environment_changes(run_a: Path, env_a: dict[str, Any] | None,
                        run_b: Path, env_b: dict[str, Any] | None) -> list[str]:
    """Differences between the runs' fingerprints; a missing manifest is a change too."""
    missing = [f"{run} has no manifest.json" for run, env in ((run_a, env_a), (run_b, env_b)) if env is None]
    if missing:
        return missing
    return fingerprint_changes(fingerprint(env_a or {}), fingerprint(env_b or {}))


def _history(result: dict[str, Any] | None, env: dict[str, Any] | None) -> dict[str, list[float]]:
    return stored_times(result, env) if result and env and result.get("files") else {}


def compare_runs(run_a: Path, run_b: Path, threshold: float | None = None) -> dict[str, Any]:
    """Every pair of run B against run A, with the environment changes between them.

    ``threshold`` None: each variant's run-to-run threshold (stored history, else the default)."""
    if threshold is not None and not 0 < threshold < 1:
        raise ValueError(f"threshold must be between 0 and 1, not {threshold}")
    results_a, env_a = load(run_a)
    results_b, env_b = load(run_b)
    changes = environment_changes(run_a, env_a, run_b, env_b)
    targets = sorted(set(results_a) | set(results_b))
    pairs = [{**compare_pair(t, results_a.get(t), results_b.get(t), threshold,
                             _history(results_a.get(t), env_a)),
              "environment_changed": bool(changes)} for t in targets]
    return {"run_a": str(run_a), "run_b": str(run_b), "threshold": threshold,
            "environment_changes": changes, "pairs": pairs}


def any_slower(comparison: dict[str, Any]) -> bool:
    """Whether some pair of run B got worse than in run A: an optimized variant significantly
    slower, or the headline lower (a baseline alone getting slower does not count)."""
    return any(p["status"] == "slower" for p in comparison["pairs"])


CSV_COLUMNS = ("target", "pair_status", "variant", "role", "status", "a_ms", "b_ms", "ratio", "ratio_low",
               "ratio_high", "change", "threshold", "p_value", "speedup_a", "speedup_b", "headline_worse",
               "environment_changed", "reason")


def csv_rows(comparison: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per pair and variant, numbers as numbers and None (an empty cell) where missing."""
    rows = []
    for pair in comparison["pairs"]:
        for row in pair["variants"]:
            ratio = row.get("ratio") or {}
            rows.append({
                "target": pair["target"], "pair_status": pair["status"], "variant": row["variant"],
                "role": row["role"], "status": row["status"], "a_ms": row["a_ms"], "b_ms": row["b_ms"],
                "ratio": ratio.get("value"), "ratio_low": ratio.get("low"), "ratio_high": ratio.get("high"),
                "change": row.get("change"), "threshold": row["threshold"], "p_value": row.get("p_value"),
                "speedup_a": (pair["speedup_a"] or {}).get("value"), "speedup_b": (pair["speedup_b"] or {}).get("value"),
                "headline_worse": pair["headline_worse"], "environment_changed": pair["environment_changed"],
                "reason": row.get("reason")})
    return rows
