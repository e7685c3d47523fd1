"""Chapter 10's GEMM ladder on the CPU: the four pairs are discovered and document themselves, each
pair's baseline is the previous rung's optimized kernel, the workloads and requirements say what
the GPU needs, and the ladder tool's table is right on recorded timings."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
import torch

from aisp.harness.benchmark import unmet_requirements
from aisp.harness.discovery import pairs_in
from aisp.harness.loader import import_module_at
from aisp.kits import native

CH10 = Path(__file__).resolve().parents[1] / "ch10"
LADDER = ("mma_sync_gemm", "wgmma_gemm", "tma_pipeline", "warp_specialization")
"""The ladder's pairs in order: pair i goes from rung i + 1 to rung i + 2."""
PAIRS = {p.name: p for p in pairs_in(CH10)}


def load(module: str) -> ModuleType:
    return import_module_at(CH10 / f"{module}.py")


def test_the_ladder_pairs_are_discovered() -> None:
    assert set(LADDER) <= set(PAIRS)
    for name in LADDER:
        assert PAIRS[name].problem is None
        assert [o.stem for o in PAIRS[name].optimized] == [f"optimized_{name}"]


@pytest.mark.parametrize("module", [f"{side}_{name}" for name in LADDER for side in ("baseline", "optimized")])
def test_pair_file_documents_itself(module: str) -> None:
    doc = load(module).__doc__ or ""
    for line in ("Baseline", "Optimized", "Expect", "Run:"):
        assert line in doc, f"{module} docstring lacks '{line}'"
    assert "not yet measured" in doc or "measured, H200" in doc, f"{module}: Expect must say measured or not"


def test_each_baseline_is_the_previous_rung() -> None:
    rungs = list(load("ch10_common").KERNELS)
    for i, name in enumerate(LADDER):
        base, opt = (load(f"{side}_{name}").get_benchmark() for side in ("baseline", "optimized"))
        assert (base.kernel, opt.kernel) == (rungs[i], rungs[i + 1]), name
        assert type(opt).workload is type(base).workload


@pytest.mark.parametrize("name", LADDER)
def test_workload_counts_the_gemm_and_needs_the_right_gpu(name: str) -> None:
    w = load(f"baseline_{name}").WORKLOAD
    assert (w.m, w.n, w.k) == (8192, 8192, 8192) and w.precision == "bf16"
    assert w.flops == 2 * 8192**3 and w.bytes == 3 * 2 * 8192**2
    assert w.requires.cuda and "nvcc" in w.requires.executables
    assert w.requires.min_compute_capability == ((8, 0) if name == "mma_sync_gemm" else (9, 0))
    assert "CUDA GPU" in unmet_requirements(w.requires, torch.device("cpu"))


def test_hopper_only_rungs_are_the_sm90a_ones() -> None:
    """The rungs built for sm_90a are those whose code names wgmma/setmaxnreg (what CI's compile
    check of every .cu detects), so rungs 1 and 2 also build for sm_80 and sm_89."""
    common = load("ch10_common")
    detected = {k for k in common.KERNELS if native.Library((CH10 / common.KERNELS[k],)).needs_sm90a()}
    assert set(common.HOPPER_ONLY) == detected == {k for k in common.KERNELS if common.library(k).needs_sm90a()}


def test_ladder_table_on_recorded_timings() -> None:
    tool = load("gemm_ladder")
    rungs = [tool.Rung("simt", 40.0), tool.Rung("ws", 2.0), tool.Rung("cublas", 1.6)]
    header, simt, ws, cublas = tool.table(rungs, 2.0 * 8192**3, 783.0)
    assert header.split() == ["kernel", "ms", "TFLOP/s", "%", "cuBLAS", "%", "peak"]
    assert simt.split() == ["simt", "40.000", "27.5", "4%", "4%"]
    assert ws.split() == ["ws", "2.000", "549.8", "80%", "70%"]
    assert cublas.split() == ["cublas", "1.600", "687.2", "100%", "88%"]
    assert tool.table(rungs, 2.0 * 8192**3, None)[2].split()[-1] == "-"
