"""Chapter 7's CUDA C++ without a GPU: every .cu is a pair's library and builds for sm_90 (sm_90a for
TMA), and the SASS holds the instruction each optimized kernel is about while its baseline kernel
does not: LDGSTS (cp.async), UTMALDG (TMA), 128-bit global loads (SoA, peeled copy), 128-bit shared
loads, and for the register-blocked matmuls many FMAs per shared-memory load and no spills; the
cp.async-fed one copies without staging registers (LDGSTS, no LDG/STS in its loop) and syncs once a
slice where regblock syncs twice."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from aisp.harness.loader import import_module_at
from aisp.kits import native

CH07 = Path(__file__).resolve().parents[1] / "ch07"
SOURCES = sorted(CH07.glob("*.cu"))
LIBRARY_OF = {"aos_soa.cu": "baseline_aos_to_soa", "misaligned_copy.cu": "baseline_misaligned_access",
              "transpose.cu": "baseline_transpose", "tiled_matmul.cu": "baseline_tiled_matmul",
              "l2_persistence.cu": "baseline_l2_persistence", "async_copy.cu": "baseline_async_copy",
              "tma_tile_copy.cu": "baseline_tma_tile_copy"}
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
needs_sass = pytest.mark.skipif(shutil.which("nvcc") is None or native.cuobjdump() is None,
                                reason="needs nvcc and cuobjdump (CUDA toolkit or the 'sass' extra)")


@pytest.fixture(autouse=True)
def cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AISP_NATIVE_CACHE", str(tmp_path_factory.getbasetemp() / "ch07-native"))


def library(source: str) -> native.Library:
    return import_module_at(CH07 / f"{LIBRARY_OF[source]}.py").LIBRARY


def kernels(sass: str) -> dict[str, str]:
    """SASS per kernel, keyed by the mangled name (``Function : _Z...``)."""
    parts = re.split(r"^\s*Function : (\S+)\s*$", sass, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def kernel(sass: str, name: str) -> str:
    found = [body for mangled, body in kernels(sass).items() if name in mangled]
    assert len(found) == 1, f"{name}: {len(found)} kernels in {sorted(kernels(sass))}"
    return found[0]


def test_every_source_is_a_pair_library() -> None:
    assert {p.name for p in SOURCES} == set(LIBRARY_OF)
    for src in SOURCES:
        assert library(src.name).sources == (src,)


@needs_nvcc
@pytest.mark.parametrize("source", sorted(LIBRARY_OF))
def test_library_builds_for_sm90(source: str) -> None:
    lib = library(source)
    path = lib.build("90")
    assert ("-sm90a-" if source == "tma_tile_copy.cu" else "-sm90-") in path.name


@needs_sass
@pytest.mark.parametrize(("source", "optimized", "baseline", "instruction"), [
    ("async_copy.cu", "cumsum_pipelined", "cumsum_sync", r"\bLDGSTS\b"),
    ("tma_tile_copy.cu", "stencil_tma", "stencil_threads", r"\bUTMALDG\b"),
    ("aos_soa.cu", "advance_soa", "advance_aos", r"\bLDG\.E\.128\b"),
    ("misaligned_copy.cu", "copy_peeled", "copy_scalar", r"\bLDG\.E\.128\b"),
])
def test_optimized_kernel_holds_its_instruction(source: str, optimized: str, baseline: str, instruction: str) -> None:
    sass = library(source).sass("90")
    assert re.search(instruction, kernel(sass, optimized)), f"{optimized} lacks {instruction}"
    assert not re.search(instruction, kernel(sass, baseline)), f"{baseline} already has {instruction}"


def fma_per_shared_load(body: str) -> float:
    return len(re.findall(r"\bFFMA\b", body)) / len(re.findall(r"\bLDS(\.\d+)?\b", body))


@needs_sass
def test_register_blocking_raises_fmas_per_shared_load() -> None:
    sass = library("tiled_matmul.cu").sass("90")
    regblock, smem = kernel(sass, "matmul_regblock"), kernel(sass, "matmul_smem")
    assert fma_per_shared_load(regblock) >= 12 > 4 >= fma_per_shared_load(smem)
    assert not re.search(r"\b(LDL|STL)\b", regblock), "matmul_regblock spills to local memory"



def count(pattern: str, text: str) -> int:
    return len(re.findall(pattern, text))


@needs_sass
def test_async_matmul_copies_without_staging_and_syncs_once_a_slice() -> None:
    sass = library("tiled_matmul.cu").sass("90")
    body, reg = kernel(sass, "matmul_async"), kernel(sass, "matmul_regblock")
    assert count(r"\bLDGSTS\b", body) == 10  # 4 x 4 bytes of A + 16 of B, before the loop and in it
    assert not re.search(r"\b(LDG|STS)\b", body), "matmul_async stages a slice through registers"
    assert count(r"\bBAR\.SYNC\b", body) == 1 and count(r"\bBAR\.SYNC\b", reg) == 2
    assert count(r"\bFFMA\b", body) == 512 and fma_per_shared_load(body) >= 12
    assert not re.search(r"\b(LDL|STL)\b", body), "matmul_async spills to local memory"
    regs = int(re.search(r"matmul_async\w*:\s+REG:(\d+)", library("tiled_matmul.cu").resource_usage("90")).group(1))
    assert regs <= 128, f"{regs} registers: fewer than two 256-thread blocks an SM"
