"""What a chapter's ``compare.py`` calls: the same runner as ``aisp bench run``, scoped to it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from aisp import suite
from aisp.harness.discovery import normalize_chapter
from aisp.harness.options import PROFILE_LEVELS, ProfileLevel, RunOptions


def _targets(chapter: str, examples: list[str] | None) -> list[str]:
    return [f"{chapter}:{name}" for name in examples] if examples else [chapter]


def compare_main(compare_file: str, argv: list[str] | None = None) -> int:
    """``python chNN/compare.py [--examples NAME ...] [--profile none|minimal|full]``."""
    chapter = normalize_chapter(Path(compare_file).resolve().parent.name)
    parser = argparse.ArgumentParser(description=f"Compare every baseline/optimized pair of {chapter}.")
    parser.add_argument("--examples", nargs="*", help="Pair names (default: all of the chapter).")
    parser.add_argument("--profile", choices=PROFILE_LEVELS, default=RunOptions.profile,
                        help="none, minimal (torch.profiler) or full (+ Nsight).")
    parser.add_argument("--iterations", type=int, default=RunOptions.iterations, help="Timed iterations per variant.")
    parser.add_argument("--warmup", type=int, default=RunOptions.warmup, help="Warmup iterations per variant (at least).")
    args = parser.parse_args(argv)
    options = RunOptions(profile=args.profile, iterations=args.iterations, warmup=args.warmup)
    return suite.run(_targets(chapter, args.examples), (), options)


def chapter_profile(compare_file: str) -> Callable[..., int]:
    """``from chNN.compare import profile; profile()``: the chapter's pairs with a torch trace
    (``level="full"`` adds Nsight)."""
    chapter = normalize_chapter(Path(compare_file).resolve().parent.name)

    def profile(examples: list[str] | None = None, level: ProfileLevel = "minimal") -> int:
        return suite.run(_targets(chapter, examples), (), RunOptions(profile=level))
    return profile


def main(compare_file: str) -> None:
    sys.exit(compare_main(compare_file))
