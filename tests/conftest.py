"""Shared test setup: a GPU marker that skips without CUDA; a chapter's (baseline, optimized) modules."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from aisp.harness.discovery import pairs_in, resolve_targets
from aisp.harness.options import RunOptions
from aisp.harness.runner import run_suite

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


def run_fixture_pairs(fixtures: Path, chapter: Path, options: RunOptions) -> list[dict]:
    """Every pair in the ``fixtures`` folder through the real harness (multi-rank ones under
    torchrun), with the ``chapter`` folder on the workers' PYTHONPATH; the results."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(chapter), os.environ.get("PYTHONPATH")])))
        results, _ = run_suite(resolve_targets([], fixtures, (fixtures,)), options)
    return results
