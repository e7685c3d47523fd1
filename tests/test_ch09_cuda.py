"""Chapter 9's CUDA C++ on a CPU (nvcc and cuobjdump, no GPU): each library its pairs declare builds
for sm_90 with its entry points; the register-tiled kernel issues 20x fewer shared-memory loads
per FFMA than the one-output kernel (1/16 against 1.25, 128-bit loads) and spills nothing; the CUTLASS
kernels hold what they are about (HGMMA and TMA loads in the sm90 one, FFMA and no tensor-core
instruction in the SIMT one; gemm_epilogue's is the ping-pong schedule with the tanh GELU, MUFU.TANH,
in its epilogue, and spills nothing) when the CUTLASS headers are present (CUTLASS_DIR or the
nvidia-cutlass wheel; a 2-4 minute nvcc build, skipped otherwise). The
repository-wide check that every .cu compiles (tests/test_kits_native.py) builds the CUTLASS files
without headers: their stubs."""

from __future__ import annotations

import ctypes
import re
import shutil
from pathlib import Path

import pytest

from aisp.harness.loader import import_module_at
from aisp.kits import cutlass as aisp_cutlass
from aisp.kits import native

CH09 = Path(__file__).resolve().parents[1] / "ch09"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
needs_sass = pytest.mark.skipif(shutil.which("nvcc") is None or native.cuobjdump() is None,
                                reason="nvcc or cuobjdump is missing")
ENTRY_POINTS = {"baseline_register_tiling": ("smem_gemm_f32", "reg_gemm_f32", "reg_gemm_bf16"),
                "optimized_cublaslt_gemm": ("lt_plan", "lt_gemm"),
                "optimized_gemm_epilogue_lt": ("epi_plan", "epi_choose", "epi_gemm")}


def cublaslt_headers_found() -> bool:
    """Whether ch09's flag search found cuBLASLt's header (an -I flag), or nvcc's toolkit holds it."""
    flags = import_module_at(CH09 / "ch09_native.py").cublaslt_flags()
    toolkit = Path(shutil.which("nvcc") or "/").resolve().parents[1] / "include" / "cublasLt.h"
    return any(flag.startswith("-I") for flag in flags) or toolkit.is_file()


def library(module: str) -> native.Library:
    mod = import_module_at(CH09 / f"{module}.py")
    return getattr(mod, "LIBRARY", None) or mod.get_benchmark().library


def test_every_cuda_source_belongs_to_a_pair() -> None:
    cutlass = ("baseline_cutlass_gemm", "optimized_cutlass_gemm", "optimized_gemm_epilogue_cutlass",
               "optimized_register_tiling_cutlass")
    used = {library(m).sources[0] for m in (*ENTRY_POINTS, *cutlass)}
    shared = aisp_cutlass.SGEMM.sources[0]  # aisp/kits/cutlass_sgemm.cu, register_tiling_cutlass's (and ch07's)
    assert used == {p.resolve() for p in CH09.glob("*.cu")} | {shared}
    assert shared.parent.name == "kits" and library("optimized_register_tiling_cutlass") is aisp_cutlass.SGEMM


@needs_nvcc
@pytest.mark.parametrize("module", sorted(ENTRY_POINTS))
def test_library_builds_for_sm90_with_its_entry_points(module: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    if module in ("optimized_cublaslt_gemm", "optimized_gemm_epilogue_lt") and not cublaslt_headers_found():
        pytest.skip("cublasLt.h is in neither the CUDA toolkit nor an nvidia-cublas wheel here")
    monkeypatch.setenv("AISP_NATIVE_CACHE", str(tmp_path))
    lib = ctypes.CDLL(str(library(module).build("90")))
    for name in ENTRY_POINTS[module]:
        assert hasattr(lib, name), f"{module}'s library does not export {name}"


def kernels(lib: native.Library) -> dict[str, str]:
    """SASS per kernel (mangled name -> body) of ``lib`` built for sm_90."""
    parts = re.split(r"\n\s*Function : ", lib.sass("90"))[1:]
    return {part.split("\n", 1)[0].strip(): part for part in parts}


def shared_loads_per_ffma(body: str) -> float:
    return len(re.findall(r"\bLDS(\.\w+)?\b", body)) / len(re.findall(r"\bFFMA\b", body))


@needs_sass
def test_register_tiling_loads_shared_memory_far_less_per_fma_and_spills_nothing() -> None:
    found = kernels(library("baseline_register_tiling"))
    reg = [body for name, body in found.items() if "reg_tiled" in name]
    smem = next(body for name, body in found.items() if "smem_tiled" in name)
    assert len(reg) == 2
    for body in reg:
        assert len(re.findall(r"\bLDS\.128\b", body)) >= 32  # 4 per k, 8 k per slab, unrolled
        assert len(re.findall(r"\bFFMA\b", body)) >= 512     # 64 per k, 8 k per slab
        assert "LDL" not in body and "STL" not in body
        assert shared_loads_per_ffma(body) <= 1 / 12
    assert shared_loads_per_ffma(smem) >= 1 / 2


needs_cutlass = pytest.mark.skipif(import_module_at(CH09 / "ch09_native.py").cutlass_include() is None,
                                   reason="CUTLASS headers not found (pip install nvidia-cutlass, or CUTLASS_DIR)")


@needs_sass
@needs_cutlass
def test_cutlass_sm90_kernel_uses_wgmma_and_tma() -> None:
    sass = library("optimized_cutlass_gemm").sass("90")
    assert "HGMMA" in sass and "UTMALDG" in sass


@needs_sass
@needs_cutlass
def test_cutlass_simt_kernel_uses_the_cuda_cores_only() -> None:
    sass = library("baseline_cutlass_gemm").sass("90")
    assert "FFMA" in sass and "HMMA" not in sass and "HGMMA" not in sass


@needs_sass
@needs_cutlass
def test_cutlass_sgemm_is_a_register_tiled_simt_kernel_fed_by_cp_async_that_spills_nothing() -> None:
    [(name, body)] = kernels(library("optimized_register_tiling_cutlass")).items()
    assert "MmaMultistage" in name and "GemmShapeILi128ELi256ELi8E" in name  # GemmShape<128, 256, 8>
    assert len(re.findall(r"\bFFMA\b", body)) >= 1024  # a 16 x 8 register tile a thread, 8 k a slab
    assert "LDGSTS" in body and "LDS.128" in body  # cp.async into shared memory, 128-bit operand loads
    assert "HMMA" not in body and "HGMMA" not in body and "LDL" not in body and "STL" not in body


@needs_sass
@needs_cutlass
def test_cutlass_gelu_kernel_is_pingpong_with_the_tanh_gelu_in_its_epilogue_and_spills_nothing() -> None:
    lib = library("optimized_gemm_epilogue_cutlass")
    [(name, body)] = kernels(lib).items()
    assert "KernelTmaWarpSpecializedPingpong" in name and "GELU_taylor" in name
    assert "HGMMA" in body and "UTMALDG" in body and "UTMASTG" in body
    assert "MUFU.TANH" in body  # the GELU's tanh, in the GEMM kernel itself
    assert "LDL" not in body and "STL" not in body
