"""``aisp bench list-targets``'s rows: each pair, its optimized variants and whether it runs here.

"Runs here" imports each pair's baseline and asks the harness whether this machine meets its
workload's requirements (CUDA, GPU count, compute capability, packages, executables); that import
brings in torch, so only this command pays it.
"""

from __future__ import annotations

from typing import Any

from aisp.harness.discovery import Pair


def why_not_here(pair: Pair) -> str | None:
    """Why the pair cannot run on this machine, None when it can (its baseline's requirements)."""
    if pair.problem:
        return pair.problem
    from aisp.harness.benchmark import default_device, unmet_requirements
    from aisp.harness.loader import load_benchmark

    try:
        bench = load_benchmark(pair.baseline)
        return unmet_requirements(bench.workload.requires, default_device())
    except ModuleNotFoundError as exc:  # a file importing an optional package at its top (triton)
        return f"needs the Python package '{exc.name}', which is not installed"
    except Exception as exc:  # noqa: BLE001 - a pair that cannot even load does not run here; say why
        return f"cannot load {pair.baseline.name}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def target_rows(pairs: list[Pair], check_here: bool = True) -> list[dict[str, Any]]:
    """One row per pair: target, chapter, optimized variants, runs_here and the reason it does not."""
    rows = []
    for pair in pairs:
        reason = why_not_here(pair) if check_here else None
        rows.append({"target": pair.target, "chapter": pair.group,
                     "variants": [p.stem for p in pair.optimized], "problem": pair.problem,
                     "runs_here": None if not check_here else reason is None, "why_not": reason})
    return rows


def chapter_counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Pairs per chapter, in chapter order."""
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["chapter"]] = counts.get(row["chapter"], 0) + 1
    return counts
