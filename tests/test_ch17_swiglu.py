"""The MoE SwiGLU kernels (aisp/kits/moe_swiglu.py, shared by ch17 and ch20) and ch17's graphed MoE
variants without a GPU: under TRITON_INTERPRET=1 (fp32 CPU tensors; the interpreter multiplies bf16 tiles
wrongly) the row pass is ``swiglu``, the grouped up GEMM with the SwiGLU epilogue covers every row of every
expert once over the device schedule (empty experts, blocks ending mid-tile, fewer tiles than programs),
``schedule`` writes device_route's layout, and the _graph and _fused_swiglu variants verify against the
baseline on two seeds and on refilled inputs; the GEMM compiles for sm_90 to TMA-fed, unserialized wgmma
without spills."""

from __future__ import annotations

from pathlib import Path

import pytest
from ci_triton_scripts import run_scripts
from triton_cpu import INTERPRETER_FIX, assert_tma_and_wgmma, cuobjdump, fits_sm90, wgmma_serialized

from aisp.harness.loader import import_module_at

ROOT = Path(__file__).resolve().parents[1]
INTERPRETED = INTERPRETER_FIX + """
import sys, torch
sys.path[:0] = ["ch17", "tests"]
from aisp.kits.moe_swiglu import grouped_swiglu, swiglu_rows
from refill_check import check_pair
from test_ch17_pairs import build
from aisp.kits.moe import swiglu
from aisp.kits.moe_schedule import device_route, schedule
torch.manual_seed(0)
h = torch.randn(37, 2 * 64)  # 37 rows: a last program of 5 of its 8
assert torch.allclose(swiglu_rows(h), swiglu(h), rtol=1e-5, atol=1e-6)
for counts in ([37, 0, 70, 13], [0, 5, 0, 3], [0, 0, 40, 0]):
    rows = sum(counts)
    xs, w = torch.randn(rows, 64), torch.randn(4, 64, 2 * 64) / 8
    e = torch.repeat_interleave(torch.arange(4), torch.tensor(counts))
    sched = schedule(torch.tensor(counts), 16)
    assert torch.equal(sched, device_route(e[torch.randperm(rows)], torch.rand(rows), 4, 16, 32)[2]), sched
    got = grouped_swiglu(xs, w, sched, tile=(16, 32, 32))  # 2 column tiles of 32 gate + 32 up columns
    want = torch.cat([swiglu(x @ w[i]) for i, x in enumerate(xs.split(counts))])
    assert torch.allclose(got, want, rtol=1e-4, atol=1e-4), (got - want).abs().max()
for variant in ("optimized_moe_grouped_gemm_graph", "optimized_moe_grouped_gemm_fused_swiglu"):
    check_pair(build, "baseline_moe_grouped_gemm", variant)
print("interpreted ok")
"""


def test_swiglu_kernels_and_graphed_variants_under_the_interpreter() -> None:
    pytest.importorskip("triton")
    proc = run_scripts({"script": INTERPRETED}, timeout=900)["script"]
    assert proc.returncode == 0 and "interpreted ok" in proc.stdout, proc.stderr[-3000:]


def compiled(name: str, sig: dict[str, str], consts: dict[str, int], num_warps: int, num_stages: int):
    """``moe_swiglu.name`` (an autotuned kernel's function) compiled for sm_90 as the pair launches it."""
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    fn = getattr(import_module_at(ROOT / "aisp" / "kits" / "moe_swiglu.py"), name)
    sig = sig | dict.fromkeys(consts, "constexpr")
    attrs = {(i,): [["tt.divisibility", 16]] for i, (a, t) in enumerate(sig.items()) if t.startswith("*") or a == "F"}
    return triton.compile(ASTSource(fn.fn if hasattr(fn, "configs") else fn, sig, consts, attrs), target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": num_warps, "num_stages": num_stages})


@pytest.mark.parametrize("stages", [3, 4])
def test_grouped_swiglu_compiles_for_sm90_to_tma_fed_wgmma_without_spills(stages: int) -> None:
    """At the pair's shapes (K = dim 2,048, 128 x (128 + 128) x 64 tiles, 8 warps), both autotune configs:
    no spill (169 registers when written), shared memory within a block's, x and weight tiles by TMA, bf16
    wgmma 64 x 128 (one per accumulator) not serialized, and the epilogue's silu on the fp32 accumulators."""
    sig = {"a_desc": "tensordesc<bf16[128, 64]>", "b_desc": "tensordesc<bf16[64, 128]>", "h_ptr": "*bf16",
           "sched_ptr": "*i32", "E1": "i32", "F": "i32", "K": "constexpr", "programs": "i32"}
    k = compiled("_grouped_swiglu", sig, {"K": 2048, "BM": 128, "BN": 128, "BK": 64, "GROUP": 8, "MAX_E": 64}, 8, stages)
    fits_sm90(k)
    assert_tma_and_wgmma(k, "x and weight")
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16" in k.asm["ptx"]
    assert not wgmma_serialized(cuobjdump(k, "-sass")), "ptxas serialized the wgmma"
    assert "ex2.approx" in k.asm["ptx"], "no exp in the epilogue: the SwiGLU is not fused"


def test_swiglu_rows_compiles_to_vector_loads_without_spills() -> None:
    k = compiled("_swiglu_rows", {"h_ptr": "*bf16", "out_ptr": "*bf16", "n_rows": "i32"}, {"F": 1024, "ROWS": 8}, 4, 1)
    fits_sm90(k)
    ptx = k.asm["ptx"]
    assert ptx.count("ld.global.v4.b32") == 16 and ptx.count("st.global.v4.b32") == 8, "not 16-byte accesses"
