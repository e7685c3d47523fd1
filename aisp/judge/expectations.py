"""Expectations per hardware key: ``<pair folder>/expectations_<key>.json``.

A run compares each pair with its stored entry. A pair is ``regressed`` only when both hold:
the new speedup's 95% interval lies wholly below the stored interval (a statistical difference),
and the drop is larger than the pair's noise floor (the A/A half-width from ``aisp bench noise``,
else twice the stored interval's half-width; never under 3%). A different environment fingerprint (GPU, driver,
CUDA, torch) is reported as "environment changed", never as a regression.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from aisp.harness.artifacts import atomic_write_json, best_variant, read_json
from aisp.harness.environment import fingerprint, fingerprint_changes

MEASURED = ("ok", "slower", "regressed")
"""Verdicts whose measurements may be stored as expectations."""
MIN_NOISE_FLOOR = 0.03
"""A relative drop under 3% is never a regression, however tight the intervals: run-to-run
variation on a GPU exceeds the within-run spread that one run's interval shows."""


def path_for(result: dict[str, Any], key: str) -> Path:
    """The expectations file of the folder a pair lives in."""
    return Path(result["files"][0]).parent / f"expectations_{key}.json"


def load(path: Path) -> dict[str, Any]:
    """A file's contents, or an empty document when it does not exist yet."""
    if not path.exists():
        return {"entries": {}}
    return read_json(path)


def _half_width(ratio: dict[str, float]) -> float:
    return (ratio["high"] - ratio["low"]) / 2 / ratio["value"] if ratio["value"] else 0.0


def noise_floor(entry: dict[str, Any]) -> float:
    """Relative noise of a pair's speedup: A/A calibration where present, else twice the stored
    interval's relative half-width (one run's interval understates run-to-run spread)."""
    calibrated = entry.get("noise", {}).get("speedup_rel")
    floor = calibrated if calibrated is not None else 2 * _half_width(entry["speedup"])
    return max(floor, MIN_NOISE_FLOOR)


def judge_entry(result: dict[str, Any], entry: dict[str, Any] | None,
                stored_env: dict[str, Any] | None, env: dict[str, Any]) -> dict[str, Any]:
    """How the result compares with its stored entry: new, environment-changed, ok or regressed."""
    if result["verdict"] not in MEASURED or not result.get("speedup"):
        return {"status": "not-compared", "detail": f"verdict {result['verdict']}"}
    if entry is None or not entry.get("speedup"):
        return {"status": "new", "detail": "no stored expectation for this pair"}
    changes = fingerprint_changes(stored_env or {}, fingerprint(env))
    if changes:
        return {"status": "environment-changed", "detail": "; ".join(changes)}
    new, old = result["speedup"], entry["speedup"]
    floor = noise_floor(entry)
    drop = (old["value"] - new["value"]) / old["value"]
    separated = new["high"] < old["low"]
    status = "regressed" if separated and drop > floor else "ok"
    detail = (f"speedup {new['value']:.2f}x [{new['low']:.2f}, {new['high']:.2f}] vs stored "
              f"{old['value']:.2f}x [{old['low']:.2f}, {old['high']:.2f}]; drop {drop:+.1%}, noise floor {floor:.1%}")
    return {"status": status, "detail": detail, "drop": drop, "noise_floor": floor,
            "stored_speedup": old}


def judge(result: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
    """Amend a result with its comparison; a regression turns its verdict into ``regressed``."""
    doc = load(path_for(result, env["hardware_key"]))
    outcome = judge_entry(result, doc["entries"].get(result["name"]), doc.get("environment"), env)
    amended = {**result, "expectation": outcome}
    if outcome["status"] == "regressed":
        amended["verdict"] = "regressed"
        amended["reason"] = "; ".join(filter(None, [result.get("reason"), f"regressed: {outcome['detail']}"]))
    return amended


def entry_from(result: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
    """What a measured result stores: times, speedup with interval, best variant, memory, provenance."""
    base, best = result["baseline"], best_variant(result)
    return {
        "baseline_ms": base["summary"]["median"],
        "optimized_ms": best["summary"]["median"] if best and best.get("summary") else None,
        "baseline_cv": base["summary"]["cv"],
        "optimized_cv": best["summary"]["cv"] if best and best.get("summary") else None,
        "speedup": result["speedup"],
        "headline": result["workload"].get("headline", "time"),
        "best": result["best"],
        "memory": {"baseline_peak_bytes": base.get("memory", {}).get("peak_bytes"),
                   "optimized_peak_bytes": (best or {}).get("memory", {}).get("peak_bytes")},
        "throughput": (best or {}).get("throughput", {}),
        "provenance": {"date": time.strftime("%Y-%m-%dT%H:%M:%S"), "commit": env.get("git_commit"),
                       "dirty": env.get("git_dirty"), "gpu_name": env.get("gpu_name"),
                       "driver": env.get("driver"), "cuda": env.get("cuda"), "torch": env.get("torch")},
    }


def update(results: list[dict[str, Any]], env: dict[str, Any]) -> list[Path]:
    """Store this run's measured pairs; entries not re-measured are kept. Returns files written."""
    by_file: dict[Path, list[dict[str, Any]]] = {}
    for result in results:
        if result["verdict"] in MEASURED and result.get("speedup") and result.get("baseline"):
            by_file.setdefault(path_for(result, env["hardware_key"]), []).append(result)
    for path, measured in by_file.items():
        doc = load(path)
        entries = dict(doc.get("entries", {}))
        for result in measured:
            noise = entries.get(result["name"], {}).get("noise")
            entries[result["name"]] = {**entry_from(result, env), **({"noise": noise} if noise else {})}
        atomic_write_json(path, {"hardware_key": env["hardware_key"], "environment": fingerprint(env),
                                 "entries": dict(sorted(entries.items()))})
    return sorted(by_file)


def store_noise(path: Path, name: str, noise: dict[str, Any], env: dict[str, Any]) -> None:
    """Record a pair's A/A noise floor, keeping everything else in the file."""
    doc = load(path)
    entries = dict(doc.get("entries", {}))
    entries[name] = {**entries.get(name, {}), "noise": noise}
    atomic_write_json(path, {"hardware_key": env["hardware_key"],
                             "environment": doc.get("environment") or fingerprint(env),
                             "entries": dict(sorted(entries.items()))})


def below_bar(root: Path, key: str, min_speedup: float) -> list[dict[str, Any]]:
    """Entries of every ``expectations_<key>.json`` under ``root`` whose speedup is under the bar."""
    rows = []
    for path in sorted(root.glob(f"*/expectations_{key}.json")):
        for name, entry in load(path).get("entries", {}).items():
            speedup = (entry.get("speedup") or {}).get("value")
            if speedup is not None and speedup < min_speedup:
                rows.append({"target": f"{path.parent.name}:{name}", "speedup": speedup,
                             "best": entry.get("best"), "headline": entry.get("headline", "time"),
                             "file": str(path)})
    return rows
