"""setup.sh and reset-gpu.sh: shellcheck-clean, reset-gpu.sh dry by default and refusing to act
without root and --yes. Nothing here ever lets reset-gpu.sh act."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = [ROOT / "setup.sh", ROOT / "reset-gpu.sh"]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_shellcheck_clean(script: Path) -> None:
    result = _run("shellcheck", str(script))
    assert result.returncode == 0, result.stdout


def test_reset_gpu_is_a_dry_run_by_default() -> None:
    result = _run("bash", str(ROOT / "reset-gpu.sh"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Dry run")
    assert "would run: nvidia-smi -i 0 --gpu-reset" in result.stdout
    assert "+ " not in result.stdout


def _as_unprivileged(*args: str) -> list[str]:
    if os.geteuid() != 0:
        return list(args)
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: cannot drop privileges to test the refusal")
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *args]


def test_reset_gpu_refuses_yes_without_root() -> None:
    result = _run(*_as_unprivileged("bash", str(ROOT / "reset-gpu.sh"), "--yes"))
    assert result.returncode == 2
    assert "refusing" in result.stderr and "nothing done" in result.stderr
    assert "would run" not in result.stdout and "+ " not in result.stdout


def test_reset_gpu_rejects_bad_arguments() -> None:
    assert _run("bash", str(ROOT / "reset-gpu.sh"), "--gpu", "zero").returncode == 2
    assert _run("bash", str(ROOT / "reset-gpu.sh"), "--force").returncode == 2


def test_setup_check_only_reports_and_changes_nothing() -> None:
    result = _run("bash", str(ROOT / "setup.sh"), "--check-only")
    assert result.returncode == 0, result.stderr
    assert "ok   python" in result.stdout and "torch" in result.stdout
    assert _run("bash", str(ROOT / "setup.sh"), "--bogus").returncode == 2
