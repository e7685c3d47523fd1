"""ch01's CUDA C++ libraries, as its pairs declare them, build through aisp.kits.native for sm_80
and sm_90 (skipped without nvcc; no GPU needed), and the Makefile builds the standalone binaries for
the GPU it is given, never a fixed one. (Every .cu's sm_90 compile check is in test_kits_native.)"""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from aisp.harness.loader import import_module_at
from aisp.kits import native

CH01 = Path(__file__).resolve().parents[1] / "ch01"
SOURCES = sorted(CH01.glob("*.cu"))
NATIVE_PAIRS = {"baseline_gemm": "gemm_init", "baseline_arithmetic_intensity": "ai_run",
                "baseline_coalescing": "coalescing_run", "optimized_cuda_graphs_pdl": "layers_run"}
"""Each pair file that declares a native.Library, and one C entry point of it."""
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")


def library_of(module: str) -> native.Library:
    lib = import_module_at(CH01 / f"{module}.py").LIBRARY
    if "-lcublas" in lib.flags:
        pytest.skip("cuBLAS not found (CUDA toolkit or the nvidia-cublas wheel)")
    return lib


def test_every_cuda_source_is_a_pair_library() -> None:
    built = {import_module_at(CH01 / f"{m}.py").LIBRARY.sources for m in NATIVE_PAIRS}
    assert built == {(src,) for src in SOURCES}


@needs_nvcc
@pytest.mark.parametrize("arch", ["80", "90"])
@pytest.mark.parametrize("module", sorted(NATIVE_PAIRS))
def test_library_builds_and_exports_its_entry_point(module: str, arch: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AISP_NATIVE_CACHE", str(tmp_path))
    path = library_of(module).build(arch)
    assert path.parent == tmp_path and f"-sm{arch}-" in path.name
    assert hasattr(ctypes.CDLL(str(path)), NATIVE_PAIRS[module])


def make_dry_run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", "-B", "-n", "-C", str(CH01), *args], capture_output=True, text=True, check=False)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not on PATH")
@pytest.mark.parametrize("arch", ["80", "90", "100", "120"])
def test_makefile_targets_the_given_arch(arch: str) -> None:
    proc = make_dry_run(f"ARCH={arch}", "all")
    assert proc.returncode == 0, proc.stderr
    for src in SOURCES:
        assert f"bin/{src.stem}_sm{arch}" in proc.stdout
    assert f"code=[sm_{arch},compute_{arch}]" in proc.stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not on PATH")
def test_makefile_without_arch_or_gpu_says_what_to_do() -> None:
    proc = make_dry_run("ARCH=", "all")
    assert proc.returncode != 0
    assert "ARCH=90" in proc.stderr


@pytest.mark.skipif(shutil.which("nvcc") is None or native.cuobjdump() is None, reason="needs nvcc and cuobjdump")
def test_layer_chain_kernels_trigger_then_wait_before_loading() -> None:
    """optimized_cuda_graphs_pdl's premise: on sm_90 each kernel lets its successor launch
    (griddepcontrol.launch_dependents: PREEXIT) and waits for its predecessor (griddepcontrol.wait:
    ACQBULK) before its first load and store."""
    sass = library_of("optimized_cuda_graphs_pdl").sass("90")
    kernels = {part.split()[0]: part for part in sass.split("Function : ")[1:]}
    for name in ("addcmul_step", "tanh_step"):
        [code] = [text for mangled, text in kernels.items() if name in mangled]
        ops = re.findall(r"\b(PREEXIT|ACQBULK|LDG|STG)\b", code)
        assert ops[:2] == ["PREEXIT", "ACQBULK"] and ops.count("STG") == 1, (name, ops)
