"""Chapter 20's MoE-layer and vision-pipeline case studies on a CPU (tiny sizes, same code): every
stage that can run on a CPU gives the baseline's output on two seeds and on refilled inputs (and
another seed's answer is rejected), the stages are discovered as variants of one baseline in stage
order, the GPU-decode stages skip on a CPU with the reason while the channels_last bf16 net still
matches, the sorted stages sync the host once (s1) or never (s2), and every file documents itself and
cites its chapter."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest
import torch
from conftest import variant_modules
from refill_check import check_refilled_pair, check_two_seeds

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
    "moe_layer_e2e": ["s1_sorted_routing", "s2_grouped_gemm"],
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
                                               ("optimized_moe_layer_e2e_s2_grouped_gemm", 0)])
def test_sorted_stages_sync_the_host_once_or_never(module: str, syncs: int, monkeypatch) -> None:
    bench = build(module, 0)
    bench.setup()
    calls = []
    for name in ("tolist", "item", "nonzero", "__int__"):
        real = getattr(torch.Tensor, name)
        monkeypatch.setattr(torch.Tensor, name, lambda self, *a, r=real, n=name, **k: calls.append(n) or r(self, *a, **k))
    bench.run()
    assert len(calls) == syncs, calls


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
