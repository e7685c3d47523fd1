"""Ceilings projected from the stored expectations instead of a run: each pair's stored best time (the
level of its history, as ``aisp bench store`` keeps it) against the ceiling its files declare now.

A projection, not a measurement: the stored times may come from different runs, days and commits. It
says where a whole-book run would land if every pair held its stored level, and which pairs a run
must still time (those with no stored entry)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

STORED = "stored"
"""The verdict of a projected result: its times are the stored level, not this run's."""


def _entry(folder: Path, name: str, key: str) -> dict[str, Any] | None:
    """The pair's entry for ``key``: from ``expectations_<key>.json``, else from a file of that key on a
    host with more GPUs (``expectations_2x_h200_host4.json``)."""
    from aisp.harness.artifacts import read_json

    for path in [folder / f"expectations_{key}.json", *sorted(folder.glob(f"expectations_{key}_host*.json"))]:
        if path.exists() and (found := (read_json(path).get("entries") or {}).get(name)):
            return found
    return None


def _variant(name: str, ms: float | None, peak: float | None, method: str | None) -> dict[str, Any]:
    memory = {"peak_bytes": peak, **({"peak_method": method} if method else {})}
    return {"name": name, "summary": {"median": ms} if ms else None, "memory": memory}


def stored_result(target: str, workload: dict[str, Any], entry: dict[str, Any] | None) -> dict[str, Any]:
    """A result dict the ceilings report reads: the stored baseline and best variant's times and peaks,
    or, without an entry, an untimed result that says so."""
    if entry is None or not entry.get("optimized_ms"):
        return {"target": target, "workload": workload, "baseline": None, "variants": [], "best": None,
                "verdict": "not stored", "reason": "no stored expectation for this hardware"}
    memory = entry.get("memory") or {}
    method = memory.get("peak_method")
    base = _variant("baseline", entry.get("baseline_ms"), memory.get("baseline_peak_bytes"), method)
    best = _variant(entry["best"], entry["optimized_ms"], memory.get("optimized_peak_bytes"), method)
    return {"target": target, "workload": workload, "baseline": base, "variants": [best], "best": entry["best"],
            "verdict": STORED}


def stored_results(root: Path, key: str) -> list[dict[str, Any]]:
    """One projected result per pair under ``root``: a one-GPU pair from ``expectations_<key>.json``,
    a pair of N GPUs from ``expectations_<N>x_<key>.json`` (its ``hardware_key`` set so its peaks are
    the N-GPU ones). A pair whose file does not import here is left out."""
    from aisp.harness.discovery import all_pairs
    from aisp.harness.execute import workload_dict
    from aisp.report.ceilings import declared_workload

    results = []
    for pair in all_pairs(root):
        workload = declared_workload(pair)
        if workload is None:  # a pair that cannot load here has nothing to project
            continue
        gpus = workload.requires.world_size
        pair_key = key if gpus <= 1 else f"{gpus}x_{key}"
        result = stored_result(pair.target, workload_dict(workload), _entry(pair.folder, pair.name, pair_key))
        results.append({**result, "hardware_key": pair_key})
    return results
