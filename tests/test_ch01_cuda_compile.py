"""Every ch01 .cu compiles with nvcc for sm_80 and sm_90 (skipped without nvcc; no GPU needed),
and the Makefile builds for the GPU it is given, never a fixed one."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CH01 = Path(__file__).resolve().parents[1] / "ch01"
sys.path.insert(0, str(CH01))
from find_cublas import cublas_flags  # noqa: E402

SOURCES = sorted(CH01.glob("*.cu"))
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")


def nvcc(src: Path, out: Path, *flags: str) -> None:
    extra = cublas_flags() if "cublas" in src.read_text() else []
    if "cublas" in src.read_text() and not extra:
        pytest.skip("cuBLAS headers not found (CUDA toolkit or the nvidia-cublas wheel)")
    proc = subprocess.run(["nvcc", "-O3", "-std=c++17", *flags, "-o", str(out), str(src), *extra],
                          capture_output=True, text=True, cwd=CH01, check=False)
    assert proc.returncode == 0, proc.stderr


def test_there_are_cuda_sources() -> None:
    assert {p.stem for p in SOURCES} >= {"gemm_batched", "arithmetic_intensity", "coalescing"}


@needs_nvcc
@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.name)
def test_executable_builds_for_sm90(src: Path, tmp_path: Path) -> None:
    nvcc(src, tmp_path / src.stem, "-arch=sm_90")


@needs_nvcc
@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.name)
def test_library_builds_for_sm80(src: Path, tmp_path: Path) -> None:
    nvcc(src, tmp_path / f"lib{src.stem}.so", "-arch=sm_80", "-DCH01_LIBRARY", "-shared", "-Xcompiler", "-fPIC")


def make_dry_run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", "-B", "-n", "-C", str(CH01), *args], capture_output=True, text=True, check=False)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not on PATH")
@pytest.mark.parametrize("arch", ["80", "90", "100", "120"])
def test_makefile_targets_the_given_arch(arch: str) -> None:
    proc = make_dry_run(f"ARCH={arch}", "all")
    assert proc.returncode == 0, proc.stderr
    for src in SOURCES:
        assert f"bin/{src.stem}_sm{arch}" in proc.stdout
        assert f"bin/lib{src.stem}_sm{arch}.so" in proc.stdout
    assert f"code=[sm_{arch},compute_{arch}]" in proc.stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not on PATH")
def test_makefile_without_arch_or_gpu_says_what_to_do() -> None:
    proc = make_dry_run("ARCH=", "all")
    assert proc.returncode != 0
    assert "ARCH=90" in proc.stderr
