"""`aisp cleanup`: what it finds, that it asks first, that --dry-run removes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from aisp.cli.main import app
from aisp.system import cleanup as cleanup_mod
from aisp.system.cleanup import removable

KEEP = ["ch01/baseline_x.py", "ch01/x.cu", "peaks/peak_h200.json", ".venv/lib/__pycache__/m.pyc",
        ".git/objects/__pycache__/o.pyc", "aisp/core.py"]
JUNK = ["ch01/bin/x", "ch02/bin/y", "artifacts/20260101/summary.json", ".pytest_cache/v/cache",
        "aisp/__pycache__/core.cpython-311.pyc", "tests/__pycache__/t.pyc"]


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    for rel in KEEP + JUNK:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")
    (root / "venv2").mkdir()
    (root / "venv2" / "pyvenv.cfg").write_text("")
    (root / "venv2" / "__pycache__").mkdir()
    for var in cleanup_mod.COMPILE_CACHE_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(cleanup_mod, "user_compile_caches", lambda: [tmp_path / "user_inductor"])
    (tmp_path / "user_inductor").mkdir()
    return root


def _junk_roots(root: Path) -> set[Path]:
    return {root / p for p in ("ch01/bin", "ch02/bin", "artifacts", ".pytest_cache", "aisp/__pycache__",
                               "tests/__pycache__")}


def test_finds_binaries_artifacts_and_caches_but_not_sources(repo: Path) -> None:
    assert set(removable(repo)) == _junk_roots(repo)


def test_compile_caches_inside_the_repo_and_user_wide_only_when_asked(repo: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    (repo / ".inductor").mkdir()
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(repo / ".inductor"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(repo.parent / "elsewhere"))
    (repo.parent / "elsewhere").mkdir()
    assert set(removable(repo)) == _junk_roots(repo) | {repo / ".inductor"}
    assert repo.parent / "user_inductor" in removable(repo, compile_caches=True)


def _all_exist(repo: Path) -> bool:
    return all((repo / rel).exists() for rel in KEEP + JUNK)


def test_dry_run_lists_and_removes_nothing(repo: Path) -> None:
    result = CliRunner().invoke(app, ["cleanup", "--root", str(repo), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "ch01/bin" in result.output and "nothing removed" in result.output
    assert _all_exist(repo)


def test_asks_first_and_a_no_keeps_everything(repo: Path) -> None:
    result = CliRunner().invoke(app, ["cleanup", "--root", str(repo)], input="n\n")
    assert result.exit_code == 1
    assert "Remove these 6 paths?" in result.output
    assert _all_exist(repo)


def test_a_yes_removes_the_junk_and_keeps_the_rest(repo: Path) -> None:
    result = CliRunner().invoke(app, ["cleanup", "--root", str(repo)], input="y\n")
    assert result.exit_code == 0, result.output
    assert not any((repo / rel).exists() for rel in JUNK)
    assert all((repo / rel).exists() for rel in KEEP)
    assert (repo / "ch01").is_dir() and (repo.parent / "user_inductor").exists()


def test_yes_flag_skips_the_prompt(repo: Path) -> None:
    result = CliRunner().invoke(app, ["cleanup", "--root", str(repo), "--yes", "--compile-caches"])
    assert result.exit_code == 0, result.output
    assert "Remove these" not in result.output
    assert not (repo / "artifacts").exists() and not (repo.parent / "user_inductor").exists()
    assert CliRunner().invoke(app, ["cleanup", "--root", str(repo)]).output.startswith("Nothing to remove")
