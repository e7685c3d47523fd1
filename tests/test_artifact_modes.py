"""Artifacts are readable by the group: files 0644 and folders 0755 under umask 022 (an atomic write
starts as mkstemp's 0600 file), and a stricter umask is still honoured."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from aisp.harness.artifacts import atomic_write_json, atomic_write_text, new_run_dir


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask():
    """Set the process umask for one test and restore it after."""
    saved = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(saved)


def test_atomic_writes_are_group_readable_under_umask_022(tmp_path, umask):
    umask(0o022)
    run_dir = new_run_dir(tmp_path / "artifacts")
    atomic_write_json(run_dir / "pair" / "results" / "r.json", {"a": 1})
    atomic_write_text(run_dir / "summary.md", "# run\n")
    assert _mode(run_dir / "pair" / "results" / "r.json") == 0o644
    assert _mode(run_dir / "summary.md") == 0o644
    assert _mode(run_dir) == 0o755
    assert _mode(run_dir / "pair" / "results") == 0o755


def test_a_stricter_umask_is_honoured(tmp_path, umask):
    umask(0o077)
    atomic_write_text(tmp_path / "private.txt", "x")
    assert _mode(tmp_path / "private.txt") == 0o600


def test_rewriting_keeps_the_mode_of_a_fresh_write(tmp_path, umask):
    umask(0o002)
    path = tmp_path / "summary.csv"
    atomic_write_text(path, "a\n")
    atomic_write_text(path, "b\n")
    assert _mode(path) == 0o664 and path.read_text() == "b\n"
