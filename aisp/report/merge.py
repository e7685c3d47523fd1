"""One run folder from the run folders of a run's shards (``aisp report merge``).

Each shard ran its part of the same selection (``--shard I/N``) on a machine of its own. The merge
copies every pair's folder, lists each shard's host, shard and schedule in the merged manifest,
and writes the summary (JSON, Markdown, CSV) again from the pairs' results. A pair found in two
shards is kept once when both results are the same, and is an error when they differ; shards of
different hardware keys are no single run and are an error too.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from aisp.harness.artifacts import atomic_write_json, read_json, write_summary
from aisp.harness.scheduler import parse_shard
from aisp.report.tables import write_tables


class MergeError(ValueError):
    """Run folders that cannot be one run; the message says which and why."""


def _load(run_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    try:
        return read_json(run_dir / "manifest.json"), read_json(run_dir / "summary.json")
    except (FileNotFoundError, ValueError) as exc:
        raise MergeError(f"{run_dir} is not a finished run folder: {exc}") from exc


def _shard_record(run_dir: Path, manifest: dict[str, Any], summary: dict[str, Any]) -> dict[str, Any]:
    return {"run_dir": str(run_dir), "run_id": summary.get("run_id"), "host": manifest.get("hostname"),
            "shard": (manifest.get("config") or {}).get("shard"), "pairs": len(summary.get("results", [])),
            "gpu_name": manifest.get("gpu_name"), "gpu_count": manifest.get("gpu_count"),
            "git_commit": manifest.get("git_commit"), "schedule": manifest.get("schedule")}


def missing_shards(shards: list[dict[str, Any]]) -> list[str]:
    """``I/N`` of the shards of this run that are not among ``shards`` (none when unsharded)."""
    given = {s["shard"] for s in shards if s.get("shard")}
    counts = {parse_shard(s)[1] for s in given}
    return [f"{i}/{n}" for n in sorted(counts) for i in range(n) if f"{i}/{n}" not in given]


def _results(run_dirs: list[Path], summaries: list[dict[str, Any]]) -> dict[str, tuple[Path, dict[str, Any]]]:
    """Each pair's result and the folder it came from, by slug; raises MergeError on a conflict."""
    found: dict[str, tuple[Path, dict[str, Any]]] = {}
    for run_dir, summary in zip(run_dirs, summaries, strict=True):
        for result in summary.get("results", []):
            slug = f"{result['group']}_{result['name']}"
            if slug in found and found[slug][1] != result:
                raise MergeError(f"{result['target']} is in {found[slug][0]} and {run_dir} with different results")
            found.setdefault(slug, (run_dir, result))
    return found


def merge(run_dirs: list[Path], out: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Write ``out`` (a new folder) from the shards' run folders; returns its results and manifest."""
    if out.exists() and any(out.iterdir()):
        raise MergeError(f"{out} exists and is not empty")
    loaded = [_load(d) for d in run_dirs]
    keys = sorted({m.get("hardware_key") for m, _ in loaded})
    if len(keys) > 1:
        raise MergeError(f"the shards ran on different hardware ({', '.join(map(str, keys))}): not one run")
    found = _results(run_dirs, [s for _, s in loaded])
    out.mkdir(parents=True, exist_ok=True)
    for slug, (run_dir, _) in found.items():
        if (run_dir / slug).is_dir():
            shutil.copytree(run_dir / slug, out / slug)
    shards = [_shard_record(d, m, s) for d, (m, s) in zip(run_dirs, loaded, strict=True)]
    first, options = loaded[0][0], {**(loaded[0][1].get("options") or {}), "shard": None}
    manifest = {**first, "config": {**(first.get("config") or {}), "shard": None}, "shards": shards,
                "hosts": sorted({str(s["host"]) for s in shards}), "missing_shards": missing_shards(shards)}
    atomic_write_json(out / "manifest.json", manifest)
    results = sorted((r for _, r in found.values()), key=lambda r: r["target"])
    write_summary(out, results, {"run_id": out.name, "hardware_key": keys[0], "options": options,
                                 "merged_from": [s["run_dir"] for s in shards]})
    write_tables(out, results)
    return results, manifest
