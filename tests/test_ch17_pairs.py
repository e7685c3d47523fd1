"""Chapter 17 pairs on a CPU: vectorized_router at its own size (it needs no GPU); the GPU-sized
one-GPU pairs at tiny sizes, same code. Every variant gives its baseline's output on two seeds and
on refilled inputs, another seed's answer is rejected, every file documents itself, the GPU-sized
pairs skip on a CPU with the reason, and each optimization does what it claims (no host sync per
expert, one forward for the batch, decode steps ordered on their own stream). The two-rank pairs
run on two gloo ranks in tests/test_ch17_multirank.py."""

from __future__ import annotations

import ast
import dataclasses
import math
import re
from pathlib import Path
from types import ModuleType

import pytest
import torch
from conftest import variant_modules
from refill_check import check_refilled_pair, check_two_seeds
from torch._inductor.utils import run_and_get_code

import aisp
from aisp.harness.benchmark import unmet_requirements
from aisp.harness.discovery import pairs_in
from aisp.harness.loader import import_module_at
from aisp.kits import moe
from aisp.kits.llm import DenseKVCache, LLMConfig

CH17 = Path(__file__).resolve().parents[1] / "ch17"
TINY = LLMConfig(vocab=256, dim=64, layers=2, heads=4, kv_heads=2, ffn=128)
MULTIRANK = ("topology_aware_moe_multigpu", "pipeline_inference_multigpu")
SMALL = {
    "vectorized_router": {},
    "moe_grouped_gemm": dict(tokens=96, dim=32, ffn=16, experts=8, top_k=2),
    "decode_batching_roofline": dict(model=TINY, requests=5, context=12),
    "prefill_decode_priority": dict(model=TINY, running=3, context=10, steps=9, long=24, arrive=2, chunk=8),
}
"""Per one-GPU pair, sizes that keep a CPU run to a second or two ({}: its own size)."""


def load(module: str) -> ModuleType:
    return import_module_at(CH17 / f"{module}.py")


def pair_of(module: str) -> str:
    return next(b for b, o in variant_modules(CH17) if module in (b, o)).removeprefix("baseline_")


def build(module: str, seed: int) -> aisp.Benchmark:
    bench = load(module).get_benchmark()
    bench.device, bench.seed = torch.device("cpu"), seed
    bench.workload = dataclasses.replace(bench.workload, **SMALL[pair_of(module)])
    return bench


def one_gpu_pairs() -> list[tuple[str, str]]:
    return [(b, o) for b, o in variant_modules(CH17) if b.removeprefix("baseline_") not in MULTIRANK]


def test_the_harness_discovers_every_pair_and_variant() -> None:
    found = {p.name: sorted(o.stem for o in p.optimized) for p in pairs_in(CH17)}
    assert sorted(found) == sorted([*SMALL, *MULTIRANK])
    assert len(found["moe_grouped_gemm"]) == 8 and len(found["prefill_decode_priority"]) == 3
    assert len(found["decode_batching_roofline"]) == 4


@pytest.mark.parametrize(("baseline", "optimized"), one_gpu_pairs())
def test_pair_matches_on_two_seeds_and_rejects_a_wrong_answer(baseline: str, optimized: str) -> None:
    check_two_seeds(build, baseline, optimized)


@pytest.mark.parametrize(("baseline", "optimized"), one_gpu_pairs())
def test_pair_matches_on_refilled_inputs(baseline: str, optimized: str) -> None:
    check_refilled_pair(build(baseline, 0), build(optimized, 0), build(baseline, 0).workload)


@pytest.mark.parametrize(("baseline", "optimized"), variant_modules(CH17))
def test_requirements_and_accounting(baseline: str, optimized: str) -> None:
    workload = load(baseline).WORKLOAD
    assert load(optimized).get_benchmark().workload is workload
    assert workload.items > 0 and workload.flops > 0
    reason = unmet_requirements(workload.requires, torch.device("cpu"))
    if baseline == "baseline_vectorized_router":
        assert reason is None  # runs on a CPU as it is: CI times it
    else:
        assert reason and "CUDA" in reason


@pytest.mark.parametrize("path", sorted(CH17.glob("*.py")), ids=lambda p: p.stem)
def test_file_documents_itself(path: Path) -> None:
    assert len(path.read_text().splitlines()) < 150
    if not path.stem.startswith(("baseline_", "optimized_")):
        return
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    for line in ("Baseline", "Optimized", "Expect", "Run:", f"ch17:{pair_of(path.stem)}"):
        assert line in doc, f"{path.name} docstring lacks '{line}'"
    assert "not yet measured" in doc or re.search(r"measured, (2 x )?H200", doc)
    if path.stem.startswith("baseline_"):
        assert "Tolerance:" in doc


def test_grouped_experts_never_wait_for_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """The baseline asks the device for a size once per expert; the grouped variant never does."""
    calls = {"nonzero": 0}
    real = torch.Tensor.nonzero
    monkeypatch.setattr(torch.Tensor, "nonzero", lambda self, *a, **k: calls.__setitem__("nonzero", calls["nonzero"] + 1) or real(self, *a, **k))
    for module in ("baseline_moe_grouped_gemm", "optimized_moe_grouped_gemm"):
        bench = build(module, 0)
        bench.setup()
        calls["nonzero"] = 0
        bench.run()
        calls[module] = calls["nonzero"]
    assert calls["baseline_moe_grouped_gemm"] == 8 and calls["optimized_moe_grouped_gemm"] == 0


@pytest.mark.parametrize("module", ["optimized_moe_grouped_gemm_graph", "optimized_moe_grouped_gemm_fused_swiglu"])
def test_graphed_moe_counts_on_the_device(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    """The graphed variants' call asks the host for nothing (it is captured in one CUDA graph): no
    ``bincount`` (CUDA's reads its input's max on the host), no ``nonzero``, ``.item()`` or ``.tolist()``."""
    seen: list[str] = []
    for name in ("nonzero", "item", "tolist"):
        real = getattr(torch.Tensor, name)
        monkeypatch.setattr(torch.Tensor, name, lambda self, *a, _n=name, _r=real, **k: seen.append(_n) or _r(self, *a, **k))
    real_bincount = torch.bincount
    monkeypatch.setattr(torch, "bincount", lambda *a, **k: seen.append("bincount") or real_bincount(*a, **k))
    bench = build(module, 0)
    bench.setup()
    monkeypatch.setitem(type(bench).forward.__globals__, "INTERPRET", True)  # the GPU path's torch ops
    monkeypatch.setattr(type(bench), "up", lambda self, xs, counts, offs: xs[:, : self.workload.ffn].contiguous())
    bench.forward()
    assert not seen, seen


def test_padded_bmm_path_equals_the_grouped_gemm() -> None:
    gen = torch.Generator().manual_seed(3)
    ids = torch.randint(6, (40, 2), generator=gen)
    order, counts = moe.sort_by_expert(ids, 6)
    xs = torch.randn(80, 16, generator=gen)
    w1, w2 = moe.expert_weights(6, 16, 8, gen, torch.device("cpu"), torch.float32)
    padded = moe.padded_ffn(xs, ids.reshape(-1)[order], counts, w1, w2)
    loop = torch.cat([moe.swiglu(x @ w1[e]) @ w2[e] for e, x in enumerate(xs.split(counts.tolist()))])
    torch.testing.assert_close(padded, loop)
    if moe.HAS_GROUPED_MM:
        torch.testing.assert_close(moe.grouped_ffn(xs, counts, w1, w2), loop)


def test_batched_decode_is_one_forward_and_reports_its_intensity() -> None:
    forwards = {}
    for module in ("baseline_decode_batching_roofline", "optimized_decode_batching_roofline"):
        bench = build(module, 0)
        bench.setup()
        calls, forward = [], bench.model.forward
        bench.model.forward = lambda *a, f=forward, n=calls, **k: n.append(1) or f(*a, **k)
        bench.run()
        forwards[module] = (len(calls), bench.metrics())
    (base_calls, base), (opt_calls, opt) = forwards.values()
    assert (base_calls, opt_calls) == (5, 1) and (base["weight_reads"], opt["weight_reads"]) == (5, 1)
    full = load("baseline_decode_batching_roofline").WORKLOAD
    assert 60 < full.flops / full.bytes < 80  # the batched step's intensity at 64 requests: under the ~186 ridge


def test_compiled_decode_step_keeps_the_cache_in_place() -> None:
    """Inductor's code for the compiled step allocates nothing the size of a layer's cache: the KV
    write is one op that mutates the cache, and attention reads the cache itself. Traced as the kit's
    ``index_put_`` on views of the cache (``DenseKVCache.bind``), the same step copies each layer's K
    and V around the write and attention: this test then fails."""
    compiled, eager = load("optimized_decode_batching_roofline_compiled"), load("optimized_decode_batching_roofline").Together
    largest = {}
    for name, in_place in (("kit", False), ("op", True)):
        bench = build("optimized_decode_batching_roofline_compiled", 0)
        bench.workload = dataclasses.replace(bench.workload, context=200)  # the cache outgrows activations
        eager.setup(bench)
        if in_place:
            bench.cache = compiled.InPlaceKV(bench.cache)
        torch._dynamo.reset()
        out, codes = run_and_get_code(torch.compile(bench.batched_step, dynamic=False))
        torch.testing.assert_close(out, eager.run(bench))
        shapes = [s for code in codes for s in re.findall(r"empty_strided_\w+\(\(([\d, ]+)\)", code)]
        largest[name] = max(math.prod(int(d) for d in s.split(",") if d.strip()) for s in shapes)
    layer = bench.cache.k[0].numel()
    assert largest["op"] < layer <= largest["kit"], (largest, layer)


def test_top_in_slices_gives_the_row_top_k() -> None:
    compiled = load("optimized_decode_batching_roofline_compiled")
    logits = torch.randn(6, 32000, generator=torch.Generator().manual_seed(1)).bfloat16()  # bf16: ties
    logits[2, 31999] = logits[4, 0] = 9.0  # a row's maximum in its last and its first slice
    token, top = compiled.top_in_slices(logits, 4)
    assert torch.equal(top, logits.topk(4).values.float()) and top.dtype == torch.float32
    assert torch.equal(logits.float().gather(1, token[:, None])[:, 0], top[:, 0]) and token[2] == 31999 and token[4] == 0
    token, top = compiled.top_in_slices(logits[:, :200], 4)  # slices shorter than k: one round
    assert torch.equal(top, logits[:, :200].topk(4).values.float())


def test_write_kv_op_writes_as_the_kit_step() -> None:
    compiled = load("optimized_decode_batching_roofline_compiled")
    gen = torch.Generator().manual_seed(0)
    positions = torch.tensor([[3], [7], [0]])
    k, v = (torch.randn(3, 1, TINY.kv_heads, TINY.head_dim, generator=gen) for _ in range(2))
    kit, op = (DenseKVCache(TINY, 3, 9, torch.device("cpu"), torch.float32) for _ in range(2))
    kit.bind(positions, 9).write(1, k, v)
    compiled.InPlaceKV(op).bind(positions, 9).write(1, k, v)
    assert torch.equal(kit.k, op.k) and torch.equal(kit.v, op.v) and kit.k[1].count_nonzero() > 0


def test_priority_variants_chunk_the_prompt_and_report_decode_gaps() -> None:
    prefilled = {}
    for module in ("baseline_prefill_decode_priority", "optimized_prefill_decode_priority",
                   "optimized_prefill_decode_priority_whole"):
        bench = build(module, 0)
        bench.setup()
        spans, real = [], bench.prefill_long
        bench.prefill_long = lambda cache, start, end, n=spans, f=real: n.append((start, end)) or f(cache, start, end)
        bench.run()
        prefilled[module] = spans
        gaps = bench.metrics()
        assert 0 < gaps["decode_gap_p50_ms"] <= gaps["decode_gap_p99_ms"] <= gaps["decode_gap_max_ms"]
    assert prefilled["baseline_prefill_decode_priority"] == [(0, 24)] == prefilled["optimized_prefill_decode_priority_whole"]
    assert prefilled["optimized_prefill_decode_priority"] == [(0, 8), (8, 16), (16, 24)]
