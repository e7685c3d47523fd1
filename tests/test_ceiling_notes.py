"""A pair's ``Workload.ceiling_note`` is the reason ``aisp report ceilings`` prints beside a pair below
80% of its ceiling: one short line taken from the chapter README or the pair's header.

Every variant file of ch01..ch20 is loaded on the CPU through discovery and the loader; a file that
imports a package this machine lacks (Triton on a CPU-only host) is read from its source instead
(the string literals passed as ``ceiling_note=``), as tests/test_windows.py does for the window."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest
from conftest import REPO

from aisp.harness.discovery import chapters, pairs_in
from aisp.harness.loader import load_benchmark

MAX_NOTE_CHARS = 160
"""A note is one table cell of ``aisp report ceilings``: a line, not a paragraph."""


def _source_notes(path: Path) -> list[str]:
    """The string literals ``path`` passes as ``ceiling_note=`` anywhere in its source."""
    notes = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.keyword) and node.arg == "ceiling_note":
            assert isinstance(node.value, ast.Constant) and isinstance(node.value.value, str), \
                f"{path.name}: ceiling_note is not a string literal"
            notes.append(node.value.value)
    return notes


def _note(path: Path) -> str | None:
    """The note ``path``'s workload carries; None where the import needs a package this machine lacks."""
    try:
        return load_benchmark(path).workload.ceiling_note
    except ModuleNotFoundError as missing:
        if importlib.util.find_spec(missing.name or "") is not None:
            raise
        return None


def note_problems(note: str) -> list[str]:
    """What is wrong with one note: empty is fine (no reason given); otherwise one line under the limit."""
    problems = []
    if "\n" in note or "\r" in note:
        problems.append("spans several lines")
    if len(note) >= MAX_NOTE_CHARS:
        problems.append(f"{len(note)} characters (limit {MAX_NOTE_CHARS - 1})")
    if note and note != note.strip():
        problems.append("leading or trailing whitespace")
    return problems


@pytest.fixture(scope="module")
def notes() -> dict[str, list[str]]:
    """By variant file (relative to the repository), the notes it carries: its loaded workload's,
    plus every literal its source passes (the only source where the import fails)."""
    found: dict[str, list[str]] = {}
    for folder in chapters(REPO).values():
        for pair in pairs_in(folder):
            for path in [pair.baseline, *pair.optimized]:
                loaded = _note(path)
                found[str(path.relative_to(REPO))] = [n for n in [loaded, *_source_notes(path)] if n]
    return found


def test_every_ceiling_note_is_one_short_line(notes):
    bad = {f"{name}: {note[:40]}...": note_problems(note)
           for name, file_notes in notes.items() for note in file_notes if note_problems(note)}
    assert not bad, f"ceiling notes that are not one line under {MAX_NOTE_CHARS} characters: {bad}"


def test_some_pairs_carry_a_note(notes):
    assert any(notes.values()), "no pair carries a ceiling_note: the discovery or the loader found nothing"


def test_a_note_in_the_source_reaches_the_loaded_workload():
    """A note passed to a workload factory must come out on the workload (a factory that dropped
    its keyword arguments would leave ``aisp report ceilings`` with no reason)."""
    missing = []
    for folder in chapters(REPO).values():
        for pair in pairs_in(folder):
            literals = _source_notes(pair.baseline)
            loaded = _note(pair.baseline)
            if literals and loaded is not None and loaded not in literals:
                missing.append(pair.target)
    assert not missing, f"a ceiling_note in the baseline's source is not on its workload: {missing}"


def test_the_check_fires_on_a_long_note_and_a_paragraph():
    assert note_problems("") == []
    assert note_problems("launch-bound: 200 tiny kernels") == []
    assert note_problems("x" * MAX_NOTE_CHARS) == [f"{MAX_NOTE_CHARS} characters (limit {MAX_NOTE_CHARS - 1})"]
    assert note_problems("first line\nsecond line") == ["spans several lines"]
    assert note_problems(" padded ") == ["leading or trailing whitespace"]


def test_notes_are_read_from_the_source_of_a_file_that_cannot_be_imported(tmp_path):
    source = tmp_path / "baseline_x.py"
    source.write_text('import triton\nWORKLOAD = aisp.Workload(items=1,\n    ceiling_note="latency-bound")\n')
    assert _source_notes(source) == ["latency-bound"]
    (tmp_path / "baseline_y.py").write_text("import triton\nWORKLOAD = aisp.Workload(items=1)\n")
    assert _source_notes(tmp_path / "baseline_y.py") == []
