"""The variant names a pair's profile and report commands print (``baseline``, ``optimized``,
``optimized_<suffix>``), read from the chapter folder's files, so a test of those commands on a pair
follows the pair when a variant is added (ch01:batch_size gained ``optimized_whole`` on 2026-12-01)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def variant_names(target: str) -> set[str]:
    """``chNN:pair`` -> {"baseline", "optimized", "optimized_<suffix>", ...}, from its files."""
    chapter, pair = target.split(":")
    stems = [p.stem for p in (ROOT / chapter).glob(f"optimized_{pair}*.py")]
    names = {"optimized" + s.removeprefix(f"optimized_{pair}") for s in stems
             if s == f"optimized_{pair}" or s.startswith(f"optimized_{pair}_")}
    return {"baseline"} | names
