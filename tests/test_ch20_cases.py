"""Chapter 20's MoE-layer and vision-pipeline case studies on a CPU (tiny sizes, same code): every
stage that can run on a CPU gives the baseline's output on two seeds and on refilled inputs (and
another seed's answer is rejected), the stages are discovered as variants of one baseline in stage
order, the GPU-decode stages skip on a CPU with the reason while the channels_last bf16 net still
matches, the sorted stages sync the host once (s1) or never (s2-s4), and every file documents itself and
cites its chapter. Stages 3 and 4's Triton kernels run under the interpreter (TRITON_INTERPRET=1, fp32 CPU
tensors): the gather combine against ``ch20_moe.combine``, each whole stage against the baseline on two seeds
and on refilled inputs, stage 4's call (device sort, gathering up GEMM) asking the host for nothing; the
combine compiles for sm_90 to 16-byte loads without spills."""

from __future__ import annotations

import ast
import dataclasses
import re
import subprocess
from pathlib import Path

import pytest
import torch
from ci_triton_scripts import assert_ran, run_scripts
from conftest import variant_modules
from refill_check import check_refilled_pair, check_two_seeds
from triton_cpu import INTERPRETER_FIX

import aisp
from aisp.harness.benchmark import unmet_requirements
from aisp.harness.discovery import pairs_in
from aisp.harness.loader import import_module_at
from aisp.harness.verify import compare

CH20 = Path(__file__).resolve().parents[1] / "ch20"
SMALL = {
    "moe_layer_e2e": dict(tokens=96, dim=64, ffn=32, experts=8, top_k=2),
    "vision_pipeline_e2e": dict(pool=6, batch=5, size=32, width=8),
}
STAGES = {
    "moe_layer_e2e": ["s1_sorted_routing", "s2_grouped_gemm", "s3_fused_swiglu", "s4_fused_gather", "s5_device_route"],
    "vision_pipeline_e2e": ["s1_uint8_pinned", "s2_gpu_decode", "s3_channels_last"],
}
GPU_ONLY = {"optimized_vision_pipeline_e2e_s2_gpu_decode", "optimized_vision_pipeline_e2e_s3_channels_last"}
MINE = [(b, o) for b, o in variant_modules(CH20) if b.removeprefix("baseline_") in SMALL]
OWN_FILES = sorted(p for p in CH20.glob("*.py") if any(n in p.stem for n in SMALL) or p.stem in ("ch20_moe", "ch20_vision"))


def build(module: str, seed: int) -> aisp.Benchmark:
    bench = import_module_at(CH20 / f"{module}.py").get_benchmark()
    bench.device, bench.seed = torch.device("cpu"), seed
    name = next(n for n in SMALL if n in module)
    bench.workload = dataclasses.replace(bench.workload, **SMALL[name])
    return bench


def test_stages_are_variants_of_one_baseline_in_order() -> None:
    pairs = {p.name: p for p in pairs_in(CH20)}
    for name, steps in STAGES.items():
        assert [o.stem for o in pairs[name].optimized] == [f"optimized_{name}_{s}" for s in steps]


@pytest.mark.parametrize(("baseline", "optimized"), MINE)
def test_stage_matches_on_two_seeds_and_rejects_a_wrong_answer(baseline: str, optimized: str) -> None:
    if optimized in GPU_ONLY:
        with pytest.raises(aisp.Unavailable, match="CUDA"):
            build(optimized, 0).setup()
        pytest.skip("nvJPEG decode needs a CUDA device (tests/test_ch20_cases_gpu.py runs it)")
    check_two_seeds(build, baseline, optimized)


@pytest.mark.parametrize(("baseline", "optimized"), [m for m in MINE if m[1] not in GPU_ONLY])
def test_stage_matches_on_refilled_inputs(baseline: str, optimized: str) -> None:
    check_refilled_pair(build(baseline, 0), build(optimized, 0), build(baseline, 0).workload)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_gpu_sized_pairs_skip_on_a_cpu_with_the_reason(name: str) -> None:
    workload = import_module_at(CH20 / f"baseline_{name}.py").WORKLOAD
    reason = unmet_requirements(workload.requires, torch.device("cpu"))
    assert reason and "CUDA" in reason
    assert workload.items > 0 and workload.flops > 0


def test_channels_last_bf16_net_matches_the_fp32_net() -> None:
    s3 = import_module_at(CH20 / "optimized_vision_pipeline_e2e_s3_channels_last.py").ChannelsLastBf16Pipeline
    base = build("baseline_vision_pipeline_e2e", 0)
    base.setup()
    with torch.no_grad():
        x = base.images()
        ref = base.forward(x)
        base.net = base.net.to(memory_format=torch.channels_last)
        out = s3.forward(base, x)
    assert base.net.stem.weight.is_contiguous(memory_format=torch.channels_last)
    compare([("output", ref)], [("output", out)], base.workload)


@pytest.mark.parametrize(("module", "syncs"), [("optimized_moe_layer_e2e_s1_sorted_routing", 1),
                                               ("optimized_moe_layer_e2e_s2_grouped_gemm", 0),
                                               ("optimized_moe_layer_e2e_s3_fused_swiglu", 0),
                                               ("optimized_moe_layer_e2e_s4_fused_gather", 0),
                                               ("optimized_moe_layer_e2e_s5_device_route", 0)])
def test_sorted_stages_sync_the_host_once_or_never(module: str, syncs: int) -> None:
    bench = build(module, 0)
    bench.setup()
    calls = host_reads(bench.run)
    assert len(calls) == syncs, calls


def host_reads(call) -> list[str]:
    """The tensor methods that read device values on the host (and ``bincount``, whose CUDA kernel reads
    its input's max there) that ``call()`` made, by name, in order."""
    calls: list[str] = []
    real = {n: getattr(torch.Tensor, n) for n in ("tolist", "item", "nonzero", "__int__", "cpu")}
    bincount = torch.bincount
    for n, f in real.items():
        setattr(torch.Tensor, n, lambda self, *a, _f=f, _n=n, **k: calls.append(_n) or _f(self, *a, **k))
    torch.bincount = lambda *a, **k: calls.append("bincount") or bincount(*a, **k)
    try:
        call()
    finally:
        for n, f in real.items():
            setattr(torch.Tensor, n, f)
        torch.bincount = bincount
    return calls


INTERPRETED = """
import sys, torch
sys.path[:0] = ["ch20", "tests"]
from ch20_moe import combine
from aisp.kits.moe_combine import gather_combine as combine_gather
from refill_check import check_pair
from test_ch20_cases import build, host_reads
torch.manual_seed(0)
for tokens, k, dim, block in ((37, 8, 64, 1024), (5, 2, 256, 128), (9, 1, 32, 32)):
    order = torch.randperm(tokens * k)  # the flat (token, slot) assignments in expert order
    gates = torch.softmax(torch.randn(tokens, k), -1)
    y = torch.randn(tokens * k, dim)  # row i: assignment order[i]'s expert output
    got, want = combine_gather(y, order, gates, block), combine(y, order, gates)
    assert got.shape == want.shape and torch.allclose(got, want, rtol=1e-5, atol=1e-5), (got - want).abs().max()
    yb = y.bfloat16()  # bf16 rows: fp32 sums, one rounding
    got = combine_gather(yb, order, gates, block)
    want = torch.zeros(tokens, dim).index_add_(0, order // k, yb.float() * gates.reshape(-1)[order, None])
    assert got.dtype == torch.bfloat16 and ((got.float() - want).abs() <= want.abs() * 2 ** -7 + 1e-6).all()
for stage in ("optimized_moe_layer_e2e_s3_fused_swiglu", "optimized_moe_layer_e2e_s4_fused_gather",
              "optimized_moe_layer_e2e_s5_device_route"):
    check_pair(build, "baseline_moe_layer_e2e", stage)
for stage in ("optimized_moe_layer_e2e_s4_fused_gather", "optimized_moe_layer_e2e_s5_device_route"):
    bench = build(stage, 0)
    bench.setup()
    assert not host_reads(bench.forward)  # the Triton path (device sort): on a GPU captured whole in one graph
print("interpreted ok")
"""


def test_fused_stage_and_gather_combine_under_the_interpreter(interpreted: dict) -> None:
    assert_ran(interpreted, "fused", "interpreted ok")


ROUTE_INTERPRETED = """
import sys, torch
sys.path[:0] = ["ch20", "tests"]
from aisp.kits.moe import route
from aisp.kits.moe_schedule import device_route
from aisp.kits.moe_topk_route import topk_route
from test_ch20_cases import build
torch.manual_seed(0)
# on the stage's own inputs: stage 5's routing is stage 4's (route + device_route at 256 a program)
bench = build("optimized_moe_layer_e2e_s5_device_route", 0)
bench.setup()
w = bench.workload
ids4, gates4 = route(bench.x, bench.w_router, w.top_k)
order4, _, sched4 = device_route(ids4.reshape(-1), gates4.reshape(-1), w.experts, 16, chunk=256)
ids, gates, order, row, sched = topk_route(bench.x @ bench.w_router, w.top_k, 16)
assert torch.equal(ids.long(), ids4) and torch.allclose(gates, gates4, rtol=1e-5, atol=1e-6)
assert torch.equal(order, order4) and torch.equal(sched, sched4)
assert torch.equal(row[order.long()], torch.arange(order.numel(), dtype=torch.int32))
print("interpreted ok")
"""


def test_device_route_stage_routes_as_stage_4_under_the_interpreter(interpreted: dict) -> None:
    """Stage 5's routing (aisp.kits.moe_topk_route, ch17's kit; its properties at ch20's launch shapes in
    tests/test_kits_moe_topk_route.py): on the stage's inputs, stage 4's ids, gates, order and schedule
    exactly."""
    assert_ran(interpreted, "route", "interpreted ok")


@pytest.fixture(scope="module")
def interpreted() -> dict[str, subprocess.CompletedProcess]:
    """Both interpreted scripts (after triton_cpu's INTERPRETER_FIX) in forks of one process that imported
    torch and Triton once (tests/ci_triton_scripts.py), each one's outcome."""
    pytest.importorskip("triton")
    return run_scripts({"fused": INTERPRETER_FIX + INTERPRETED, "route": INTERPRETER_FIX + ROUTE_INTERPRETED})


def test_device_route_stage_runs_at_the_shape_ch17_compiles_its_kit_for() -> None:
    """The kit's sm_90 compile test (tests/test_ch17_moe_fused.py: 64 experts, top-8, 32 tokens a program, 4
    warps) covers stage 5 only while ch20's H200 workload routes the same sizes as ch17's."""
    ch20 = import_module_at(CH20 / "baseline_moe_layer_e2e.py").WORKLOAD
    ch17 = import_module_at(CH20.parent / "ch17" / "baseline_moe_grouped_gemm.py").WORKLOAD
    sizes = ("tokens", "dim", "ffn", "experts", "top_k")
    assert [getattr(ch20, f) for f in sizes] == [getattr(ch17, f) for f in sizes] == [16384, 2048, 1024, 64, 8]


@pytest.mark.parametrize("path", OWN_FILES, ids=lambda p: p.stem)
def test_file_documents_itself(path: Path) -> None:
    assert len(path.read_text().splitlines()) < 150
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    assert doc, f"{path.name} has no docstring"
    if not path.stem.startswith(("baseline_", "optimized_")):
        return
    for line in ("Baseline", "Optimized", "Expect", "Run:"):
        assert line in doc, f"{path.name} docstring lacks '{line}'"
    assert "not yet measured" in doc or re.search(r"measured, (2 x )?H200", doc)
    if path.stem.startswith("baseline_"):
        assert "Tolerance:" in doc and "Ceiling:" in doc
    else:  # a stage names the chapter its technique comes from
        assert re.findall(r"\bch(\d\d)\b", doc.split("Baseline")[0]), path.name
