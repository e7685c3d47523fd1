"""ch11's CUDA C++ libraries, as its pairs declare them, build through aisp.kits.native for sm_90
(no GPU needed; skipped without nvcc) and export their entry points; the small kernel keeps its
FMA chain (the compiler did not fold the loop away). Every .cu's compile check is also in
test_kits_native."""

from __future__ import annotations

import ctypes
import shutil
from pathlib import Path

import pytest

from aisp.harness.loader import import_module_at
from aisp.kits import native

CH11 = Path(__file__).resolve().parents[1] / "ch11"
ENTRY_POINTS = {"ch11_kernels": ("small_kernel", "legacy_run"), "stream_ordered": ("alloc_run", "pool_init")}
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")


def libraries() -> dict[str, native.Library]:
    kernels = import_module_at(CH11 / "ch11_common.py").KERNELS
    ordered = import_module_at(CH11 / "baseline_stream_ordered_allocator.py").LIBRARY
    return {lib.name: lib for lib in (kernels, ordered)}


def test_every_cuda_source_is_a_declared_library() -> None:
    assert {lib.sources for lib in libraries().values()} == {(src,) for src in sorted(CH11.glob("*.cu"))}
    assert set(libraries()) == set(ENTRY_POINTS)


@needs_nvcc
@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_library_builds_for_sm90_and_exports_its_entry_points(name: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AISP_NATIVE_CACHE", str(tmp_path))
    path = libraries()[name].build("90")
    assert path.parent == tmp_path and "-sm90-" in path.name
    lib = ctypes.CDLL(str(path))
    for entry in ENTRY_POINTS[name]:
        assert hasattr(lib, entry), f"{name} does not export {entry}"


@needs_nvcc
def test_fma_chain_is_a_loop_of_ffma(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if native.cuobjdump() is None:
        pytest.skip("cuobjdump is not available")
    monkeypatch.setenv("AISP_NATIVE_CACHE", str(tmp_path))
    sass = libraries()["ch11_kernels"].sass("90")
    body = sass[sass.index("fma_chain"):]
    assert "FFMA" in body and "BRA" in body
