"""Chapter 9 on a GPU: every optimized variant matches its baseline within the pair's tolerance (each
native GEMM has also checked itself against torch.matmul in setup()); the fused GEMM epilogue runs no
elementwise pass (cuBLASLt's GELU_BIAS epilogue, not PyTorch's GEMM + GELU fallback) and the fused row
kernels once each; the CUDA-core GEMMs of tiled_gemm.cu agree with torch.mm off the square (the
pipelined ones bit for bit with reg_tiled) and refuse ragged shapes; the roofline tool runs on this
GPU's peaks."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest
import torch

from aisp.harness.benchmark import unmet_requirements
from aisp.harness.discovery import pairs_in
from aisp.harness.loader import import_module_at
from aisp.harness.verify import compare, flatten
from aisp.kits import native

CH09 = Path(__file__).resolve().parents[1] / "ch09"
VARIANTS = [(p.baseline.stem, o.stem) for p in pairs_in(CH09) for o in p.optimized]
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def set_up(module: str, seed: int = 3):
    bench = import_module_at(CH09 / f"{module}.py").get_benchmark()
    reason = unmet_requirements(bench.workload.requires, torch.device("cuda"))
    if reason:
        pytest.skip(f"{module}: {reason}")
    bench.device, bench.seed = torch.device("cuda"), seed
    bench.setup()
    return bench


def output(bench) -> list[tuple[str, torch.Tensor]]:
    out = [(p, t.detach().clone()) for p, t in flatten(bench.run())]
    torch.cuda.synchronize()
    return out


@pytest.mark.parametrize(("baseline", "optimized"), VARIANTS)
def test_optimized_matches_baseline(baseline: str, optimized: str) -> None:
    base = output(set_up(baseline))
    opt = output(set_up(optimized))
    compare(base, opt, import_module_at(CH09 / f"{baseline}.py").WORKLOAD)


TILED_ENTRIES = ("smem_gemm_f32", "reg_gemm_f32", "pipelined_gemm_f32", "pipelined2_gemm_f32")


def tiled_gemm(entry: str, a: torch.Tensor, b: torch.Tensor) -> tuple[int, torch.Tensor]:
    """``entry`` of tiled_gemm.cu on ``a @ b``: its status and C (NaN where it wrote nothing)."""
    mod = import_module_at(CH09 / "baseline_register_tiling.py")
    fn = getattr(mod.ch09_native.TILED.load(a.device), entry)
    fn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] * 3 + [ctypes.c_void_p]
    c = torch.full((a.shape[0], b.shape[1]), float("nan"), device=a.device)
    status = fn(a.data_ptr(), b.data_ptr(), c.data_ptr(), a.shape[0], b.shape[1], a.shape[1],
                native.stream(a.device))
    torch.cuda.synchronize()
    return status, c


@pytest.mark.parametrize(("m", "n", "k"), [(384, 256, 160), (128, 640, 1056), (256, 128, 32)])
def test_tiled_gemms_match_torch_mm_off_the_square(m: int, n: int, k: int) -> None:
    gen = torch.Generator(device="cuda").manual_seed(5)
    a = torch.randn(m, k, device="cuda", generator=gen)
    b = torch.randn(k, n, device="cuda", generator=gen)
    want = torch.mm(a.double(), b.double()).float()
    got = {}
    for entry in TILED_ENTRIES:
        status, got[entry] = tiled_gemm(entry, a, b)
        error = float((got[entry] - want).norm() / want.norm())
        assert status == 0 and error < 1e-5, (entry, status, error)
    for entry in ("pipelined_gemm_f32", "pipelined2_gemm_f32"):  # same k order, same fmaf
        assert torch.equal(got[entry], got["reg_gemm_f32"]), entry


@pytest.mark.parametrize("entry", TILED_ENTRIES)
def test_tiled_gemms_refuse_ragged_shapes(entry: str) -> None:
    a, b = torch.randn(200, 96, device="cuda"), torch.randn(96, 130, device="cuda")
    assert tiled_gemm(entry, a, b)[0] == 1


def kernels_launched(bench) -> list[str]:
    from torch.profiler import ProfilerActivity, profile

    bench.run()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        bench.run()
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def test_gemm_epilogue_runs_no_elementwise_pass() -> None:
    unfused = kernels_launched(set_up("baseline_gemm_epilogue"))
    fused = kernels_launched(set_up("optimized_gemm_epilogue"))
    assert any("elementwise" in name for name in unfused), unfused  # the GELU pass
    assert not any("elementwise" in name for name in fused) and len(fused) < len(unfused), fused


def test_fused_row_kernels_launch_once() -> None:
    assert len(kernels_launched(set_up("optimized_fused_rmsnorm"))) == 1
    assert len(kernels_launched(set_up("optimized_fused_softmax"))) == 1
    assert len(kernels_launched(set_up("baseline_fused_softmax"))) == 5


def test_roofline_table_runs_on_this_gpus_peaks(capsys) -> None:
    roofline = import_module_at(CH09 / "roofline_table.py")
    code = roofline.main([])
    out = capsys.readouterr().out
    assert code == 0 and "| split_k |" in out or code == 2 and "aisp peak" in out
