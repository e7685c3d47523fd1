"""Finding pairs: chapters ``ch01``…``ch20`` and users' own folders, and resolving targets."""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path

CHAPTER_RE = re.compile(r"^ch(\d+)$")


class TargetError(ValueError):
    """A target that names no chapter or pair; the message lists close matches."""


@dataclass(frozen=True)
class Pair:
    """A baseline file and its optimized alternatives in one folder."""

    group: str
    """The chapter (``ch01``) or, for a ``--root`` folder, the folder's name."""
    name: str
    folder: Path
    baseline: Path
    optimized: tuple[Path, ...]

    @property
    def target(self) -> str:
        return f"{self.group}:{self.name}"

    @property
    def slug(self) -> str:
        return f"{self.group}_{self.name}"

    @property
    def problem(self) -> str | None:
        """Why these files are no pair: a baseline without an optimized file, or the reverse."""
        if not self.optimized:
            return f"{self.baseline.name} has no optimized_{self.name}[_<variant>].py beside it"
        return None if self.baseline.exists() else f"{self.optimized[0].name} has no {self.baseline.name} beside it"


def repo_root() -> Path:
    """Where the chapters live: $AISP_ROOT, else the working directory if it holds chapters,
    else the checkout the package was installed from."""
    if os.environ.get("AISP_ROOT"):
        return Path(os.environ["AISP_ROOT"]).resolve()
    cwd = Path.cwd()
    if any(CHAPTER_RE.match(p.name) for p in cwd.iterdir() if p.is_dir()):
        return cwd
    return Path(__file__).resolve().parents[2]


def normalize_chapter(text: str) -> str:
    """``ch1`` → ``ch01``; other names unchanged."""
    match = CHAPTER_RE.match(text.lower())
    return f"ch{int(match.group(1)):02d}" if match else text


def pairs_in(folder: Path, group: str | None = None) -> list[Pair]:
    """Every ``baseline_<name>.py`` in ``folder`` with its ``optimized_<name>[_<variant>].py`` files.

    An optimized file belongs to the baseline with the longest matching name, so
    ``optimized_performance_pinned.py`` pairs with ``baseline_performance.py`` unless a
    ``baseline_performance_pinned.py`` exists. A file without its other half is kept, with a
    :attr:`Pair.problem`, so that a run reports it.
    """
    group = group or normalize_chapter(folder.name)
    baselines = [p.stem[len("baseline_"):] for p in sorted(folder.glob("baseline_*.py"))]
    owned: dict[str, list[Path]] = {name: [] for name in baselines}
    for opt in sorted(folder.glob("optimized_*.py")):
        stem = opt.stem[len("optimized_"):]
        owners = [n for n in baselines if stem == n or stem.startswith(n + "_")]
        owned.setdefault(max(owners, key=len) if owners else stem, []).append(opt)
    return [Pair(group, name, folder, folder / f"baseline_{name}.py", tuple(opts)) for name, opts in owned.items()]


def chapters(root: Path) -> dict[str, Path]:
    """Chapter folders under ``root`` by normalized name."""
    return {normalize_chapter(p.name): p for p in sorted(root.iterdir())
            if p.is_dir() and CHAPTER_RE.match(p.name)}


def all_pairs(root: Path, extra_roots: tuple[Path, ...] = ()) -> list[Pair]:
    """Every pair of every chapter, then of each ``--root`` folder."""
    found = [pair for folder in chapters(root).values() for pair in pairs_in(folder)]
    for extra in extra_roots:
        if not extra.is_dir():
            raise TargetError(f"--root {extra}: no such folder")
        found.extend(pairs_in(extra.resolve(), group=extra.resolve().name))
    return found


def resolve_targets(targets: list[str], root: Path, extra_roots: tuple[Path, ...] = ()) -> list[Pair]:
    """Pairs named by ``ch01``, ``ch1``, ``ch01:name`` (or a --root folder's name). No targets: every
    pair (only the --root folders' pairs when any are given)."""
    pairs = all_pairs(root, extra_roots)
    if not targets:
        names = {r.resolve().name for r in extra_roots}
        chosen = [p for p in pairs if p.group in names] if extra_roots else pairs
        if not chosen:
            raise TargetError(f"No pair (baseline_<name>.py, optimized_<name>.py) under {', '.join(map(str, extra_roots or [root]))}")
        return chosen
    chosen: list[Pair] = []
    for raw in targets:
        group, _, name = raw.partition(":")
        group = normalize_chapter(group)
        matches = [p for p in pairs if p.group == group and (not name or p.name == name)]
        if not matches:
            raise TargetError(_unknown(raw, pairs))
        chosen.extend(m for m in matches if m not in chosen)
    return chosen


def _unknown(raw: str, pairs: list[Pair]) -> str:
    known = sorted({p.group for p in pairs} | {p.target for p in pairs})
    close = difflib.get_close_matches(raw, known, n=5, cutoff=0.5)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    return f"Unknown target '{raw}'.{hint} ('aisp bench list-targets' lists them.)"
