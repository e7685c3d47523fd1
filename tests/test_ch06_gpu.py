"""Chapter 6 on a GPU: every pair's variants agree (ilp_accumulators also on refilled inputs), the
occupancy model matches the runtime's answers for every kernel, the occupancy facts the pair
headers state hold on this GPU, and the first-kernel tool runs. (Timings come from
``aisp bench run -t ch06``.)"""

from __future__ import annotations

import ctypes
from pathlib import Path
from types import ModuleType

import pytest
import torch
from refill_check import check_refilled_pair

from aisp.harness.loader import import_module_at
from aisp.kits import native

pytestmark = pytest.mark.gpu
CH06 = Path(__file__).resolve().parents[1] / "ch06"
PAIRS = ("vectorized_ops", "vector_add", "block_size", "occupancy_api", "launch_bounds", "ilp_accumulators",
         "bank_conflicts", "unified_memory_prefetch")


def load(module: str) -> ModuleType:
    return import_module_at(CH06 / f"{module}.py")


def sms() -> int:
    return torch.cuda.get_device_properties(0).multi_processor_count


def skip_without_page_faulting() -> None:
    lib = load("baseline_unified_memory_prefetch").LIBRARY.load()
    if not lib.um_supported():
        pytest.skip("no GPU page faulting here (cudaDevAttrConcurrentManagedAccess = 0)")


@pytest.mark.parametrize("name", PAIRS)
def test_pair_matches_on_gpu(name: str) -> None:
    if name == "unified_memory_prefetch":
        skip_without_page_faulting()
    outs = []
    for side in ("baseline", "optimized"):
        bench = load(f"{side}_{name}").get_benchmark()
        bench.device, bench.seed = torch.device("cuda"), 3
        bench.setup()
        outs.append(bench.run().detach().clone())
        bench.teardown()
    w = bench.workload
    torch.testing.assert_close(outs[1], outs[0], atol=w.atol or 3e-4 * float(outs[0].pow(2).mean().sqrt()),
                               rtol=w.rtol or 1e-4)


def test_ilp_accumulators_match_on_refilled_inputs() -> None:
    """The harness's checked call: x refilled with normal values of its mean and std (some |x| > 1,
    which overflowed fp32 before the kernels clamped x) before both variants run again."""
    base, opt = (load(f"{side}_ilp_accumulators").get_benchmark() for side in ("baseline", "optimized"))
    for bench in (base, opt):
        bench.device, bench.seed = torch.device("cuda"), 3
    check_refilled_pair(base, opt, base.workload)
    assert float(base.x.abs().max()) > 1 and bool(torch.isfinite(opt.out).all())


def test_occupancy_model_matches_the_runtime(capsys: pytest.CaptureFixture[str]) -> None:
    assert load("occupancy").main(["--blocks", "32", "64", "128", "256", "512", "1024"]) == 0, capsys.readouterr().out


def test_occupancy_api_picks_full_occupancy_for_dequantize() -> None:
    occupancy = load("occupancy")
    sm, kernels, api, advice = occupancy.query(occupancy.LIBRARY.load(), [128, 1024])
    assert api[("dequantize", 128)] == 6 and api[("dequantize", 1024)] == 2
    line = next(a for a in advice if "dequantize" in a)
    assert "block 1024" in line and f"grid {2 * sm.sms:>5}" in line


def test_grids_fill_every_sm_as_the_headers_say() -> None:
    lb = load("baseline_launch_bounds").LIBRARY.load()
    assert (lb.horner_grid(0), lb.horner_grid(1)) == (4 * sms(), 8 * sms())
    assert load("ch06_common").VECTOR_LIBRARY.load().grid_stride_blocks() == 8 * sms()


def test_first_kernels_tool(capfd: pytest.CaptureFixture[str]) -> None:
    assert load("first_kernels").main(["--rows", "100", "--cols", "37"]) == 0
    out = capfd.readouterr().out
    assert "Hello from block 1, thread 3" in out and "All results match PyTorch." in out


def test_managed_memory_support_is_reported() -> None:
    lib = load("baseline_unified_memory_prefetch").LIBRARY.load()
    assert lib.um_supported() in (0, 1)
    lib.um_alloc.restype, lib.um_alloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    ptr = lib.um_alloc(1 << 20)
    assert ptr and native.check(lib.um_free(ctypes.c_void_p(ptr)), "cudaFree") is None
