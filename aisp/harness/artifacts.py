"""Artifacts of a run: atomic, schema-versioned JSON plus Markdown and CSV summaries."""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
FILE_MODE = 0o666
"""Mode of an artifact before the umask: readable by the group and others under the usual 022."""


def _umask() -> int:
    """The process umask, read without changing it where /proc tells it (Linux 4.7+): swapping it
    to read it would race with files other threads create meanwhile."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never a part.

    The file gets the mode an ordinary ``open`` would give it (0644 under umask 022), not the 0600
    of the temporary file it starts as: artifacts are read by the group (a shared results folder).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, FILE_MODE & ~_umask())
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def atomic_write_json(path: Path, data: dict[str, Any]) -> None:
    """Write a JSON document atomically, stamping ``schema_version`` when it has none."""
    data = {"schema_version": SCHEMA_VERSION, **data}
    atomic_write_text(path, json.dumps(_json_safe(data), indent=2, default=str) + "\n")


def read_json(path: Path) -> dict[str, Any]:
    """Read one of our JSON files; a clear error for a missing, malformed or newer file."""
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: malformed JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")
    if data.get("schema_version", SCHEMA_VERSION) > SCHEMA_VERSION:
        raise ValueError(f"{path}: schema_version {data['schema_version']} is newer than this aisp "
                         f"understands ({SCHEMA_VERSION}); upgrade aisp")
    return data


def new_run_dir(artifacts_dir: Path) -> Path:
    """``artifacts/<timestamp>/``, unique even for runs started in the same second."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1000):
        candidate = artifacts_dir / (stamp if n == 0 else f"{stamp}-{n}")
        try:
            candidate.mkdir(parents=True)
            return candidate
        except FileExistsError:
            continue
    raise RuntimeError(f"could not create a run folder under {artifacts_dir}")


def world_size(workload: dict[str, Any]) -> int:
    """``Requirements.world_size`` of a workload stored in a result (a dict; 1 when none is said).
    Here, not beside ``Requirements``, so that reading results does not import torch."""
    requires = workload.get("requires") or {}
    return max(int(requires.get("gpus") or 1), int(requires.get("ranks") or 1))


def best_variant(result: dict[str, Any]) -> dict[str, Any] | None:
    """The optimized variant named as the pair's headline, if any."""
    return next((v for v in result.get("variants", []) if v["name"] == result.get("best")), None)


def pair_result_path(run_dir: Path, slug: str) -> Path:
    """Where a run folder keeps the result of the pair ``<chapter>_<name>`` (``slug``)."""
    return run_dir / slug / "results" / "benchmark_test_results.json"


def write_pair(run_dir: Path, result: dict[str, Any]) -> Path:
    """``<chapter>_<name>/results/benchmark_test_results.json``; returns the results folder (the
    report layer adds the Markdown beside it)."""
    path = pair_result_path(run_dir, f"{result['group']}_{result['name']}")
    atomic_write_json(path, result)
    return path.parent


def write_summary(run_dir: Path, results: list[dict[str, Any]], extra: dict[str, Any]) -> None:
    """``summary.json``: every result of the run (the report layer renders it as Markdown and CSV)."""
    atomic_write_json(run_dir / "summary.json", {**extra, "results": results})
