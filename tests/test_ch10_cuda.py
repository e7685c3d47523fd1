"""Chapter 10's GEMM ladder without a GPU: each rung builds (sm_90, or sm_90a for the Hopper rungs)
and its SASS holds the instructions the rung is about and not the next rung's: FFMA only (SIMT),
HMMA + LDSM + LDGSTS (mma.sync), HGMMA + LDGSTS (wgmma), HGMMA + UTMALDG (TMA),
HGMMA + UTMALDG + USETMAXREG (warp specialization); the wgmmas stay pipelined (ptxas did not
serialize them), nothing spills, and the warp-specialized kernel has exactly the 168 registers per
thread its setmaxnreg counts assume."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from aisp.harness.loader import import_module_at
from aisp.kits import native

CH10 = Path(__file__).resolve().parents[1] / "ch10"
COMMON = import_module_at(CH10 / "ch10_common.py")
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
needs_sass = pytest.mark.skipif(shutil.which("nvcc") is None or native.cuobjdump() is None,
                                reason="needs nvcc and cuobjdump (CUDA toolkit or the 'sass' extra)")
HAS = {"simt": ("FFMA",), "mma_sync": ("HMMA.16816.F32.BF16", "LDSM", "LDGSTS"),
       "wgmma": ("HGMMA.64x256x16.F32.BF16", "LDGSTS"), "tma": ("HGMMA.64x256x16.F32.BF16", "UTMALDG"),
       "ws": ("HGMMA.64x256x16.F32.BF16", "UTMALDG", "USETMAXREG.DEALLOC", "USETMAXREG.TRY_ALLOC")}
LACKS = {"simt": ("HMMA", "HGMMA"), "mma_sync": ("HGMMA",), "wgmma": ("UTMALDG", "HMMA"),
         "tma": ("LDGSTS", "USETMAXREG"), "ws": ("LDGSTS",)}


@pytest.fixture(autouse=True)
def cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AISP_NATIVE_CACHE", str(tmp_path_factory.getbasetemp() / "ch10-native"))


def test_every_gemm_source_is_a_rung() -> None:
    assert {p.name for p in CH10.glob("gemm_*.cu")} == set(COMMON.KERNELS.values())


@needs_nvcc
@pytest.mark.parametrize("kernel", list(COMMON.KERNELS))
def test_rung_builds_for_its_arch(kernel: str) -> None:
    path = COMMON.library(kernel).build("90")
    assert ("-sm90a-" if kernel in COMMON.HOPPER_ONLY else "-sm90-") in path.name


@needs_sass
@pytest.mark.parametrize("kernel", list(COMMON.KERNELS))
def test_sass_holds_the_rungs_instructions(kernel: str) -> None:
    sass = COMMON.library(kernel).sass("90")
    for op in HAS[kernel]:
        assert op in sass, f"{kernel}: no {op} in SASS"
    for op in LACKS[kernel]:
        assert op not in sass, f"{kernel}: unexpected {op} in SASS"


@needs_sass
@pytest.mark.parametrize("kernel", COMMON.HOPPER_ONLY)
def test_wgmmas_stay_pipelined(kernel: str) -> None:
    """ptxas serializes wgmmas it cannot prove safe (warning C7515): then every HGMMA waits for the
    previous one (each carries gsb0 and is followed by a wait). Pipelined, only a slice's last does."""
    hgmma = re.findall(r"HGMMA\.64x256x16\.F32\.BF16[^;]*;", COMMON.library(kernel).sass("90"))
    chained = [op for op in hgmma if "gsb0" not in op]
    assert len(hgmma) >= 4 and len(chained) >= 3 * (len(hgmma) - len(chained)), hgmma


@needs_sass
@pytest.mark.parametrize("kernel", list(COMMON.KERNELS))
def test_no_spills(kernel: str) -> None:
    usage = COMMON.library(kernel).resource_usage("90")
    assert "STACK:0 " in usage and "LOCAL:0 " in usage, usage


@needs_sass
def test_warp_specialized_kernel_has_the_registers_setmaxnreg_redistributes() -> None:
    """384 threads x 168 registers = 128 x 40 (producer) + 256 x 232 (consumers): with fewer at
    launch, the consumers' setmaxnreg.inc would wait forever for registers the block does not have."""
    usage = COMMON.library("ws").resource_usage("90")
    assert re.findall(r"REG:(\d+)", usage) == ["168"], usage
