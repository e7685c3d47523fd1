"""What the dashboard shows, read from an artifacts folder: every run folder and every pair in it.

A run folder is one with a ``summary.json`` (``aisp bench run`` writes it with ``manifest.json`` and,
per pair, ``<chapter>_<name>/`` with results, logs and profiles). Folders without one, or whose
summary cannot be read, are listed as skipped with the reason rather than stopping the build.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from aisp.harness.artifacts import read_json

RUN_ID_DATE = re.compile(r"^(\d{8}-\d{6})")


@dataclass(frozen=True)
class Run:
    """One run folder: its summary's results and its manifest (environment)."""

    folder: Path
    run_id: str
    date: str
    """ISO date-time of the run (from its timestamp id, else the summary file's time)."""
    hardware_key: str
    manifest: dict[str, Any]
    results: list[dict[str, Any]]
    verify_only: bool

    @property
    def commit(self) -> str:
        commit = self.manifest.get("git_commit") or ""
        return commit[:10] + ("+dirty" if self.manifest.get("git_dirty") else "") if commit else "unknown"

    @property
    def gpu(self) -> str:
        name, count = self.manifest.get("gpu_name"), self.manifest.get("gpu_count") or 0
        return (f"{count} x {name}" if count > 1 else name) if name else "CPU"


@dataclass(frozen=True)
class PairRun:
    """One pair's result in one run."""

    run: Run
    result: dict[str, Any]

    @property
    def key(self) -> str:
        """The hardware key the pair was judged under (a one-GPU pair on a 2-GPU host: h200)."""
        return (self.result.get("expectation") or {}).get("hardware_key") or self.run.hardware_key

    @property
    def folder(self) -> Path:
        return self.run.folder / f"{self.result['group']}_{self.result['name']}"


@dataclass(frozen=True)
class Collection:
    """Every readable run (oldest first), the pairs by target, and the folders skipped with why."""

    runs: list[Run]
    pairs: dict[str, list[PairRun]]
    skipped: list[tuple[Path, str]] = field(default_factory=list)

    def chapters(self) -> dict[str, list[str]]:
        """Targets by chapter, both sorted."""
        by_chapter: dict[str, list[str]] = {}
        for target in sorted(self.pairs):
            by_chapter.setdefault(target.split(":")[0], []).append(target)
        return dict(sorted(by_chapter.items()))


def _date(run_dir: Path, run_id: str, manifest: dict[str, Any] | None = None) -> str:
    """When the run started: from its id (``20261128-084510``); for a run merged from shards (named as
    its ``-o`` folder), its first shard's; else when its summary was written (a copied folder's copy
    time: the last resort)."""
    shard_ids = [str(s.get("run_id", "")) for s in (manifest or {}).get("shards", []) if isinstance(s, dict)]
    for candidate in sorted(i for i in [run_id, *shard_ids] if RUN_ID_DATE.match(i)):
        return datetime.strptime(RUN_ID_DATE.match(candidate).group(1), "%Y%m%d-%H%M%S").isoformat()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime((run_dir / "summary.json").stat().st_mtime))


def load_run(run_dir: Path) -> Run:
    """One run folder; ValueError or FileNotFoundError for an unreadable one."""
    summary = read_json(run_dir / "summary.json")
    manifest_path = run_dir / "manifest.json"
    manifest = read_json(manifest_path) if manifest_path.exists() else {}
    run_id = str(summary.get("run_id") or run_dir.name)
    results = [r for r in summary.get("results", []) if isinstance(r, dict) and r.get("group") and r.get("name")]
    return Run(run_dir, run_id, _date(run_dir, run_id, manifest),
               str(summary.get("hardware_key") or manifest.get("hardware_key") or "unknown"), manifest,
               results, bool((summary.get("options") or {}).get("verify_only")))


def collect(artifacts_dir: Path) -> Collection:
    """Every run folder directly under ``artifacts_dir`` (or ``artifacts_dir`` itself when it is one)."""
    candidates = [artifacts_dir] if (artifacts_dir / "summary.json").exists() else \
        sorted(p for p in artifacts_dir.iterdir() if p.is_dir() and not p.name.startswith("."))
    runs, skipped = [], []
    for folder in candidates:
        if not (folder / "summary.json").exists():
            skipped.append((folder, "no summary.json"))
            continue
        try:
            runs.append(load_run(folder))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            skipped.append((folder, str(exc)))
    runs.sort(key=lambda r: (r.date, r.run_id))
    pairs: dict[str, list[PairRun]] = {}
    for run in runs:
        for result in run.results:
            pairs.setdefault(f"{result['group']}:{result['name']}", []).append(PairRun(run, result))
    return Collection(runs, pairs, skipped)


def latest_by_key(history: list[PairRun], timed_only: bool = True) -> dict[str, PairRun]:
    """The newest result of a pair per hardware key; a verify-only run does not replace a timed one."""
    latest: dict[str, PairRun] = {}
    for entry in history:
        if timed_only and entry.run.verify_only and entry.key in latest:
            continue
        latest[entry.key] = entry
    return latest


def expectation_entry(root: Path, result: dict[str, Any], key: str) -> dict[str, Any] | None:
    """The stored expectation of a pair for a hardware key (``<root>/<chapter>/expectations_<key>.json``),
    or None where there is none or the file cannot be read."""
    path = root / result["group"] / f"expectations_{key}.json"
    if not path.exists():
        return None
    try:
        return (read_json(path).get("entries") or {}).get(result["name"])
    except ValueError:
        return None
