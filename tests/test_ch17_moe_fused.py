"""Chapter 17's up GEMM with the row gather fused into its x load (aisp/kits/moe_gather.py) and the _fused_gather
variants without a GPU: under TRITON_INTERPRET=1 (fp32 CPU tensors) the kernel gives ``swiglu(x[order // top_k]
@ w[e])`` for every row of every expert (empty experts, blocks ending mid-tile, fewer tiles than programs) and
what ``grouped_swiglu`` gives on the gathered copy; both variants (device sort, torch sort) verify against the
baseline on two seeds and on refilled inputs, and the device-sort one asks the host for nothing; the kernel
compiles for sm_90 to cp.async-fed x tiles, TMA-fed weights and unserialized wgmma without spills."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from ci_triton_scripts import assert_ran, run_scripts
from triton_cpu import INTERPRETER_FIX, cuobjdump, fits_sm90, wgmma_serialized

from aisp.harness.loader import import_module_at

ROOT = Path(__file__).resolve().parents[1]
INTERPRETED = """
import sys, torch
sys.path[:0] = ["ch17", "tests"]
from aisp.kits.moe_gather import gather_swiglu
from refill_check import check_pair
from test_ch17_pairs import build
from aisp.kits.moe import swiglu
from aisp.kits.moe_schedule import device_route
from aisp.kits.moe_swiglu import grouped_swiglu
torch.manual_seed(0)
for counts, top_k in (([37, 0, 70, 13], 2), ([0, 5, 0, 3], 4), ([0, 0, 40, 0], 8)):
    rows = sum(counts)
    x, w = torch.randn(-(-rows // top_k), 64), torch.randn(4, 64, 2 * 64) / 8
    e = torch.repeat_interleave(torch.arange(4), torch.tensor(counts))[torch.randperm(rows)]
    order, _, sched = device_route(e, torch.rand(rows), 4, 16, 32)
    xs = x[order.long() // top_k]
    got = gather_swiglu(x, order, top_k, w, sched, tile=(16, 32, 32))  # 2 column tiles of 32 gate + 32 up columns
    want = torch.cat([swiglu(a @ w[i]) for i, a in enumerate(xs.split(counts))])
    assert torch.allclose(got, want, rtol=1e-4, atol=1e-4), (got - want).abs().max()
    assert torch.equal(got, grouped_swiglu(xs, w, sched, tile=(16, 32, 32)))
for variant in ("optimized_moe_grouped_gemm_fused_gather", "optimized_moe_grouped_gemm_fused_gather_torch_sort"):
    check_pair(build, "baseline_moe_grouped_gemm", variant)
seen = []
bench = build("optimized_moe_grouped_gemm_fused_gather", 0)
bench.setup()
for name in ("nonzero", "item", "tolist", "cpu"):
    real = getattr(torch.Tensor, name)
    setattr(torch.Tensor, name, lambda self, *a, _n=name, _r=real, **k: seen.append(_n) or _r(self, *a, **k))
torch.bincount = lambda *a, **k: seen.append("bincount")
bench.forward()
assert not seen, seen  # on a GPU the call is captured whole in one CUDA graph
print("interpreted ok")
"""


def test_gather_swiglu_and_the_fused_gather_variant_under_the_interpreter(interpreted: dict) -> None:
    assert_ran(interpreted, "gather", "interpreted ok")


@pytest.mark.parametrize("stages", [3, 4])
def test_gather_swiglu_compiles_for_sm90_to_cp_async_x_tma_weights_and_wgmma_without_spills(stages: int) -> None:
    """At the pair's shapes (K = dim 2,048, top-8, 128 x (128 + 128) x 64 tiles, 8 warps), both autotune configs:
    no spill (240 registers when written), shared memory within a block's; the x rows by 16-byte cp.async (four a
    thread a stage), the weights by TMA; bf16 wgmma 64 x 128 not serialized; silu in the epilogue."""
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    fn = import_module_at(ROOT / "aisp" / "kits" / "moe_gather.py")._gather_swiglu.fn
    consts = {"K": 2048, "TOP_K": 8, "BM": 128, "BN": 128, "BK": 64, "GROUP": 8, "MAX_E": 64}
    sig = {"x_ptr": "*bf16", "order_ptr": "*i32", "b_desc": "tensordesc<bf16[64, 128]>", "h_ptr": "*bf16",
           "sched_ptr": "*i32", "E1": "i32", "F": "i32", "programs": "i32"} | dict.fromkeys(consts, "constexpr")
    attrs = {(i,): [["tt.divisibility", 16]] for i, (a, t) in enumerate(sig.items()) if t.startswith("*") or a == "F"}
    k = triton.compile(ASTSource(fn, sig, consts, attrs), target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": 8, "num_stages": stages})
    fits_sm90(k)
    ptx, sass = k.asm["ptx"], cuobjdump(k, "-sass")
    assert ptx.count("cp.async.cg.shared.global") == 4 * stages and "0x10" in ptx, "x rows not by 16-byte cp.async"
    assert "cp.async.bulk.tensor" in ptx, "the weights are not loaded by TMA"
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16" in ptx and "HGMMA" in sass
    assert not wgmma_serialized(sass), "ptxas serialized the wgmma"
    assert "ex2.approx" in ptx, "no exp in the epilogue: the SwiGLU is not fused"


def test_device_route_at_256_assignments_a_program_spills_far_less_at_64_experts() -> None:
    """_fused_gather's sort: device_route's ``_sort`` at the pair's 131,072 assignments and 64 experts, compiled for
    sm_90 as launched (4 warps): its (chunk, 64) one-hot table at the default chunk of 1,024 spills 4.4 KB a thread
    (when written), at the variant's 256 under a tenth of that."""
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton_cpu import resource_usage

    from aisp.kits import moe_schedule
    stack = {}
    for chunk in (256, 1024):
        consts = {"E": 64, "EP2": 64, "CHUNK": chunk, "PARTS": 131072 // chunk, "BM": 128}
        sig = {"expert_ptr": "*i64", "gate_ptr": "*fp32", "part_ptr": "*i32", "order_ptr": "*i32", "sgate_ptr": "*fp32",
               "sched_ptr": "*i32", "ROWS": "i32"} | dict.fromkeys(consts, "constexpr")
        attrs = {(i,): [["tt.divisibility", 16]] for i, t in enumerate(sig.values()) if t.startswith("*")}
        k = triton.compile(ASTSource(moe_schedule._sort, sig, consts, attrs), target=GPUTarget("cuda", 90, 32),
                           options={"num_warps": 4})
        stack[chunk] = resource_usage(k)["STACK"]
    assert stack[256] * 10 < stack[1024], stack


ROUTE_INTERPRETED = """
import sys, torch
sys.path[:0] = ["ch17", "tests"]
from refill_check import check_pair
from test_ch17_pairs import build
variant = "optimized_moe_grouped_gemm_fused_route"
check_pair(build, "baseline_moe_grouped_gemm", variant)
seen = []
bench = build(variant, 0)
bench.setup()
for name in ("nonzero", "item", "tolist", "cpu"):
    real = getattr(torch.Tensor, name)
    setattr(torch.Tensor, name, lambda self, *a, _n=name, _r=real, **k: seen.append(_n) or _r(self, *a, **k))
bench.forward()
assert not seen, seen  # on a GPU the call is captured whole in one CUDA graph
print("interpreted ok")
"""


def test_the_fused_route_variant_under_the_interpreter(interpreted: dict) -> None:
    """The _fused_route variant (aisp.kits.moe_topk_route's routing, checked in tests/test_kits_moe_topk_route.py)
    verifies against the baseline and asks the host for nothing."""
    assert_ran(interpreted, "route", "interpreted ok")


@pytest.fixture(scope="module")
def interpreted() -> dict[str, subprocess.CompletedProcess]:
    """Both interpreted scripts, each after INTERPRETER_FIX, in forks of one process that imported torch and
    triton once for the two (tests/ci_triton_scripts.py)."""
    pytest.importorskip("triton")
    return run_scripts({name: INTERPRETER_FIX + script for name, script in (("gather", INTERPRETED),
                                                                             ("route", ROUTE_INTERPRETED))})


def test_topk_route_kernels_compile_for_sm90_without_spills() -> None:
    """As topk_route launches them at the pair's sizes (64 experts, top-8, 32 tokens a program, 4 warps each)."""
    from triton_cpu import compile_sm90
    i32 = "*i32"
    for kernel, sig, consts in (
            ("_topk_count", {"logit_ptr": "*bf16", "ids_ptr": i32, "gate_ptr": "*fp32", "part_ptr": i32, "tokens": "i32"},
             {"E": 64, "EP2": 64, "K": 8, "KP2": 8, "BT": 32}),
            ("_scan", {"part_ptr": i32, "base_ptr": i32, "sched_ptr": i32, "parts": "i32"},
             {"E": 64, "EP2": 64, "QB": 64, "BM": 128}),
            ("_place", {"ids_ptr": i32, "base_ptr": i32, "order_ptr": i32, "row_ptr": i32, "ROWS": "i32"},
             {"EP2": 64, "CHUNK": 256, "CP2": 256})):
        fits_sm90(compile_sm90(f"aisp/kits/moe_topk_route:{kernel}", sig, consts, {"num_warps": 4},
                               divisible=(next(a for a, t in sig.items() if t == "i32"),)))
