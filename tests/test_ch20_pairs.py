"""Chapter 20's case studies on a CPU (tiny sizes, same code): every stage gives the baseline's
output on two seeds and on refilled inputs, another seed's answer is rejected, the stages are
discovered as variants of one baseline in stage order, every file documents itself and cites the
chapter its technique comes from, the GPU-sized pairs skip on a CPU with the reason, and each
stage does what it claims (fewer decode steps, fp8 weights, a compiled model, MFU reported)."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path
from types import ModuleType

import pytest
import torch
from conftest import variant_modules
from refill_check import check_refilled_pair, check_two_seeds

import aisp
from aisp.harness.benchmark import unmet_requirements
from aisp.harness.discovery import pairs_in
from aisp.harness.loader import import_module_at
from aisp.kits.gpt import GPTConfig
from aisp.kits.llm import LLMConfig, StreamConfig

CH20 = Path(__file__).resolve().parents[1] / "ch20"
TINY_LLM = LLMConfig(vocab=256, dim=64, layers=2, heads=4, kv_heads=2, ffn=128)
TINY_STREAM = StreamConfig(requests=7, prompt_mean=8, output_mean=5, spread=0.7, max_prompt=16, max_output=12, vocab=256)
SMALL = {
    "llm_inference_e2e": dict(model=TINY_LLM, stream=TINY_STREAM, slots=3),
    "gpt_training_e2e": dict(model=GPTConfig(vocab=512, seq=64, dim=64, heads=4, layers=2), batch=2),
}
"""Per case study, workload sizes that keep a run to a second or so on a CPU."""
CASES = ("moe_layer_e2e", "vision_pipeline_e2e", "ddp_training_e2e_multigpu")
"""The other case studies: tests/test_ch20_cases.py and tests/test_ch20_ddp.py cover them."""
MINE = [(b, o) for b, o in variant_modules(CH20) if b.removeprefix("baseline_") in SMALL]
OWN_FILES = sorted(p for p in CH20.glob("*.py") if not any(n in p.stem for n in (*CASES, "ch20_moe", "ch20_vision", "ch20_ddp")))
STAGES = {
    "llm_inference_e2e": ["s1_kv_cache", "s2_cuda_graph", "s3_fp8_weights", "s4_continuous_batching"],
    "gpt_training_e2e": ["s1_bf16_autocast", "s2_fused_adamw_sdpa", "s3_compile"],
}


def load(module: str) -> ModuleType:
    return import_module_at(CH20 / f"{module}.py")


def build(module: str, seed: int) -> aisp.Benchmark:
    bench = load(module).get_benchmark()
    bench.device, bench.seed = torch.device("cpu"), seed
    name = next(b for b, o in variant_modules(CH20) if module in (b, o)).removeprefix("baseline_")
    bench.workload = dataclasses.replace(bench.workload, **SMALL[name])
    if hasattr(bench, "backend"):
        bench.backend = "aot_eager"  # the same traced graphs without a C++ toolchain
    return bench


def test_stages_are_variants_of_one_baseline_in_order() -> None:
    pairs = {p.name: p for p in pairs_in(CH20)}
    assert sorted(pairs) == sorted([*SMALL, *CASES])
    for name, steps in STAGES.items():
        assert [o.stem for o in pairs[name].optimized] == [f"optimized_{name}_{s}" for s in steps]


@pytest.mark.parametrize(("baseline", "optimized"), MINE)
def test_stage_matches_on_two_seeds_and_rejects_a_wrong_answer(baseline: str, optimized: str) -> None:
    check_two_seeds(build, baseline, optimized)


@pytest.mark.parametrize(("baseline", "optimized"), MINE)
def test_stage_matches_on_refilled_inputs(baseline: str, optimized: str) -> None:
    check_refilled_pair(build(baseline, 0), build(optimized, 0), build(baseline, 0).workload)


@pytest.mark.parametrize("baseline", sorted({b for b, _ in MINE}))
def test_gpu_sized_pairs_skip_on_a_cpu_with_the_reason(baseline: str) -> None:
    workload = load(baseline).WORKLOAD
    reason = unmet_requirements(workload.requires, torch.device("cpu"))
    assert reason and "CUDA" in reason
    assert workload.items > 0 and workload.flops > 0


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
        assert "Tolerance:" in doc
    else:  # a stage names the chapter its technique comes from, never one being built (17, 18)
        cited = set(re.findall(r"\bch(\d\d)\b", doc.split("Baseline")[0]))
        assert cited and not cited & {"17", "18"}, f"{path.name} cites {cited}"


def decode_steps(module: str) -> int:
    """Forwards of one token per row (decode steps) that one run() makes."""
    bench = build(module, 0)
    bench.setup()
    calls, forward = [], bench.model.forward
    bench.model.forward = lambda tokens, *a, **k: calls.append(tokens.shape[1] == 1) or forward(tokens, *a, **k)
    bench.run()
    return sum(calls)


def test_continuous_batching_takes_fewer_decode_steps() -> None:
    w = build("baseline_llm_inference_e2e", 0).workload
    static = decode_steps("optimized_llm_inference_e2e_s3_fp8_weights")
    continuous = decode_steps("optimized_llm_inference_e2e_s4_continuous_batching")
    assert static == w.static_steps()
    assert w.fewest_steps() <= continuous < static


def test_fp8_stage_keeps_no_bf16_linear_and_halves_weight_bytes() -> None:
    s2, s3 = build("optimized_llm_inference_e2e_s2_cuda_graph", 0), build("optimized_llm_inference_e2e_s3_fp8_weights", 0)
    for bench in (s2, s3):
        bench.setup()
    assert not any(isinstance(m, torch.nn.Linear) for m in s3.model.modules())

    def linear_bytes(model: torch.nn.Module) -> int:
        return sum(t.numel() * t.element_size() for n, t in model.state_dict().items()
                   if not n.startswith("embed") and t.dim() == 2)

    ratio = linear_bytes(s3.model) / linear_bytes(s2.model)
    assert ratio == pytest.approx(0.25, rel=0.05)  # e4m3 against fp32 on a CPU (bf16 on a GPU: 0.5)


def test_continuous_batching_admits_in_groups_at_full_stream() -> None:
    """At the real stream and 8 slots (tiny model): 97 decode steps against 128 static, and 5
    prefill forwards (8 then 4 x 4) where admitting at every free slot takes 16."""
    sizes = dict(model=TINY_LLM, stream=dataclasses.replace(load("ch20_llm").STREAM, vocab=256), slots=8)
    counts = {}
    for module in ("optimized_llm_inference_e2e_s3_fp8_weights", "optimized_llm_inference_e2e_s4_continuous_batching"):
        bench = build(module, 0)
        bench.workload = dataclasses.replace(bench.workload, **sizes)
        bench.setup()
        calls, hidden = [], bench.model.hidden  # prefill and decode forwards both run hidden()
        bench.model.hidden = lambda tokens, *a, f=hidden, n=calls, **k: n.append(tokens.shape[1]) or f(tokens, *a, **k)
        bench.run()
        counts[module[-4:]] = (sum(c == 1 for c in calls), sum(c > 1 for c in calls))
    assert counts == {"ghts": (128, 3), "hing": (97, 5)}


def test_compiled_stage_compiles_and_training_stages_report_their_options() -> None:
    bench = build("optimized_gpt_training_e2e_s3_compile", 0)
    bench.setup()
    assert isinstance(bench.model, torch._dynamo.eval_frame.OptimizedModule)
    assert bench.metrics()["compile_s"] > 0
    assert bench.opt.defaults["fused"] and bench.autocast == torch.bfloat16 and bench.sdpa
    base = build("baseline_gpt_training_e2e", 0)
    base.setup()
    assert base.metrics() == {}  # MFU needs CUDA events
    assert type(base.model.blocks[0].attn).__name__ == "MathAttention" and not base.opt.defaults.get("fused")


def test_training_call_starts_from_the_same_state() -> None:
    bench = build("baseline_gpt_training_e2e", 0)
    bench.setup()
    first = bench.run()
    second = bench.run()
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))
