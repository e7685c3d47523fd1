"""chNN/compare.py is a thin wrapper over the same runner as aisp bench run."""

from __future__ import annotations

import importlib

import pytest
from conftest import REPO

from aisp import chapter, suite


@pytest.mark.parametrize("name", sorted(p.name for p in REPO.glob("ch[0-9][0-9]") if (p / "compare.py").exists()))
def test_compare_passes_chapter_targets_to_the_runner(monkeypatch, name):
    seen = {}

    def fake_run(targets, roots, options, reporter=None):
        seen.update(targets=targets, options=options)
        return 0

    monkeypatch.setattr(suite, "run", fake_run)
    assert chapter.compare_main(str(REPO / name / "compare.py"), ["--examples", "a", "b", "--profile", "minimal"]) == 0
    assert seen["targets"] == [f"{name}:a", f"{name}:b"] and seen["options"].profile == "minimal"
    assert chapter.compare_main(str(REPO / name / "compare.py"), []) == 0
    assert seen["targets"] == [name] and seen["options"].profile == "none"


def test_seed_profile_entry_point(monkeypatch):
    seen = {}
    monkeypatch.setattr(suite, "run", lambda targets, roots, options, reporter=None: seen.update(
        targets=targets, profile=options.profile) or 0)
    module = importlib.import_module("ch01.compare")
    assert module.profile() == 0
    assert seen == {"targets": ["ch01"], "profile": "minimal"}
