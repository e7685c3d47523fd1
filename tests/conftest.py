"""Shared test setup: a GPU marker that skips without CUDA; a chapter's (baseline, optimized) modules."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from aisp.harness.discovery import pairs_in

REPO = Path(__file__).resolve().parent.parent
FIXTURE_PAIRS = Path(__file__).resolve().parent / "fixtures" / "pairs"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords or "multigpu" in item.keywords:
            item.add_marker(skip)


def variant_modules(folder: Path) -> list[tuple[str, str]]:
    """(baseline module, optimized module) for every optimized file in ``folder``, matched as the
    harness's discovery matches them (the longest baseline name)."""
    return [(pair.baseline.stem, opt.stem) for pair in pairs_in(folder) for opt in pair.optimized]
