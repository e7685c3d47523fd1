"""Chapter 16 pairs on a CPU (tiny sizes, same code): every variant gives its baseline's output on
two seeds and on refilled inputs, another seed's answer is rejected, every pair file documents
itself, the GPU-sized pairs skip on a CPU with the reason, and each optimization does what it
claims (fewer target forwards, kept blocks only, host work between launch and wait).
The fp8 pairs (Triton kernels) are checked under the Triton interpreter in test_ch16_triton.py, the
two-rank pair on two gloo ranks in test_ch16_tp.py."""

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
from triton_cpu import verify_pair_interpreted

import aisp
from aisp.harness.benchmark import unmet_requirements
from aisp.harness.execute import guarded_run
from aisp.harness.loader import import_module_at
from aisp.harness.verify import VerificationError, compare
from aisp.kits.llm import LLMConfig

CH16 = Path(__file__).resolve().parents[1] / "ch16"
TINY = LLMConfig(vocab=256, dim=64, layers=2, heads=4, kv_heads=2, ffn=128)
TRITON_PAIRS = ("fp8_kv_cache", "fp8_weight_decode")
MULTIRANK_PAIRS = ("tp_decode_multigpu",)

SMALL = {
    "decode_cuda_graph": dict(model=TINY, batch=2, prompt=12, steps=6),
    "speculative_decoding": dict(model=TINY, prompt=12, steps=20, draft_layers=1, draft_miss=0.3),
    "gpu_sampling": dict(steps=3, batch=2, vocab=300),
    "block_sparse_attention": dict(batch=1, heads=2, seq=512, head_dim=32, span=128, sink=32),
    "async_scheduling": dict(model=TINY, slots=3, shortest=5, span=9, steps=7, page_size=4),
}
"""Per CPU-checked pair, workload sizes that keep a run to a second or two."""


def load(module: str) -> ModuleType:
    return import_module_at(CH16 / f"{module}.py")


TRITON_VARIANTS = {"optimized_block_sparse_attention_triton": "block_sparse_attention",
                   "optimized_block_sparse_attention_hostdesc": "block_sparse_attention",
                   "optimized_gpu_sampling_fused": "gpu_sampling", "optimized_gpu_sampling_fused_graph": "gpu_sampling"}
"""Triton variants of CPU-checked pairs and their pair: verified under the Triton interpreter instead."""


def cpu_pairs() -> list[tuple[str, str]]:
    return [(b, o) for b, o in variant_modules(CH16)
            if b.removeprefix("baseline_") not in TRITON_PAIRS + MULTIRANK_PAIRS and o not in TRITON_VARIANTS]


def build(module: str, seed: int) -> aisp.Benchmark:
    bench = load(module).get_benchmark()
    bench.device, bench.seed = torch.device("cpu"), seed
    name = next(b for b, o in variant_modules(CH16) if module in (b, o)).removeprefix("baseline_")
    bench.workload = dataclasses.replace(bench.workload, **SMALL[name])
    return bench


def test_every_pair_is_checked_on_a_cpu() -> None:
    names = sorted({b.removeprefix("baseline_") for b, _ in variant_modules(CH16)})
    assert names == sorted([*SMALL, *TRITON_PAIRS, *MULTIRANK_PAIRS])


@pytest.mark.parametrize(("baseline", "optimized"), cpu_pairs())
def test_pair_matches_on_two_seeds_and_rejects_a_wrong_answer(baseline: str, optimized: str) -> None:
    check_two_seeds(build, baseline, optimized)


@pytest.mark.parametrize(("baseline", "optimized"), cpu_pairs())
def test_pair_matches_on_refilled_inputs(baseline: str, optimized: str) -> None:
    check_refilled_pair(build(baseline, 0), build(optimized, 0), build(baseline, 0).workload)


@pytest.mark.parametrize(("baseline", "optimized"), variant_modules(CH16))
def test_gpu_sized_pairs_skip_on_a_cpu_with_the_reason(baseline: str, optimized: str) -> None:
    workload = load(baseline).WORKLOAD
    reason = unmet_requirements(workload.requires, torch.device("cpu"))
    assert reason and "CUDA" in reason
    assert workload.items > 0 and (workload.flops > 0 or workload.bytes > 0)


@pytest.mark.parametrize("path", sorted(CH16.glob("*_*.py")), ids=lambda p: p.stem)
def test_pair_file_documents_itself(path: Path) -> None:
    assert len(path.read_text().splitlines()) < 150
    if not path.stem.startswith(("baseline_", "optimized_")):
        return
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    for line in ("Baseline", "Optimized", "Expect", "Run:"):
        assert line in doc, f"{path.name} docstring lacks '{line}'"
    assert "not yet measured" in doc or re.search(r"measured, (2 x )?H200", doc), f"{path.name}: Expect is neither measured nor marked"
    if path.stem.startswith("baseline_"):
        assert "Tolerance:" in doc


def fp32_draws(keys: torch.Tensor) -> torch.Tensor:
    """gpu_sampling's Exp(1) draws as they were: the hashed uniform in fp32."""
    return -torch.log((load("baseline_gpu_sampling").key_hash(keys).float() + 0.5) / 2.0**31)


def fp32_race(logits: torch.Tensor, p: float, keys: torch.Tensor, exact: bool = False) -> torch.Tensor:
    """gpu_sampling's race as it was before the float64 change: probabilities, their sort and
    cumulative sum and the draws in fp32. ``exact``: the probabilities and sums in float64 instead
    (the same fp32 draws): a device that rounds the sums closer than the host does (the GPU's trees)."""
    dtype = torch.float64 if exact else torch.float32
    probs, order = torch.softmax(logits.to(dtype), dim=-1).sort(dim=-1, descending=True, stable=True)
    before = probs.cumsum(dim=-1) - probs
    draws = fp32_draws(keys).to(dtype)
    pick = (probs.masked_fill(before >= p, 0.0) / draws.gather(-1, order)).argmax(dim=-1, keepdim=True)
    return order.gather(-1, pick).squeeze(-1)


def cut_between_roundings(logits: torch.Tensor, keys: torch.Tensor) -> float:
    """A top-p between the host's fp32 cumulative probability and the exact one at a token that wins
    the race when kept: where a 32,000-token row's cut must land for the two roundings to differ."""
    probs, order = torch.softmax(logits.double(), dim=-1).sort(descending=True, stable=True)
    exact = probs.cumsum(-1) - probs
    p32 = torch.softmax(logits, dim=-1)[order]
    host = (p32.cumsum(-1) - p32).double()
    ratio = probs / fp32_draws(keys).double()[order]
    leads = ratio > torch.cummax(ratio, 0).values.roll(1)  # wins the race when it is the last token kept
    j = int(((host - exact).abs() > 1e-6).logical_and(leads).nonzero()[-1])
    return float(((host[j] + exact[j]) / 2).float())


def test_float64_sampling_holds_where_the_fp32_roundings_drew_different_tokens() -> None:
    """One row of the pair's size (32,000 logits, spread 4; seed 2): the host's fp32 softmax is off by
    ~3e-6, and with the cut between its cumulative probability and the exact one at a token that then
    wins the race (p ~0.973, the 1,183rd most likely token), fp32 on the host and fp32 summed exactly (as the
    GPU's trees nearly do) draw different tokens. The float64 race draws the same token under two
    roundings of its sums."""
    mod = load("baseline_gpu_sampling")
    logits = 4.0 * torch.randn(1, 32000, generator=torch.Generator().manual_seed(2))
    keys = torch.arange(32000)[None]
    p = cut_between_roundings(logits[0], keys[0])
    assert fp32_race(logits, p, keys) != fp32_race(logits, p, keys, exact=True)
    probs, order = torch.softmax(logits.double(), dim=-1).sort(dim=-1, descending=True, stable=True)
    total = probs.sum(-1, keepdim=True)
    before = total - probs.flip(-1).cumsum(-1).flip(-1)  # the same sums, another rounding
    kept = probs.masked_fill(before >= p, 0.0)
    other = order.gather(-1, (kept / mod.race_noise(keys).gather(-1, order)).argmax(-1, keepdim=True)).squeeze(-1)
    assert mod.top_p_race(logits, p, keys) == other
    assert (torch.softmax(logits.double(), -1).sum() - 1).abs() < 1e-12 < (torch.softmax(logits, -1).double().sum() - 1).abs()


def test_float64_draws_are_never_zero() -> None:
    """Key 6,418,304 hashes to 2^31 - 13: in fp32 its uniform rounds to 1, a draw of 0 (64 of 2^31
    keys), and a dropped token's 0/0 won the argmax. In float64 the draw is positive."""
    key = torch.tensor([6418304])
    assert float(load("baseline_gpu_sampling").race_noise(key)) > 0
    assert float(fp32_race(torch.tensor([[0.0, 5.0]]), 0.9, torch.tensor([[key, 0]]))) == 0  # dropped, drawn


def test_sampling_check_fires_on_draws_of_another_step() -> None:
    base, opt = build("baseline_gpu_sampling", 0), build("optimized_gpu_sampling", 0)
    base.setup()
    opt.setup()
    keys = opt.keys
    opt.keys = lambda step, device: keys(step + 1, device)
    with pytest.raises(VerificationError, match="exact match"):
        compare(guarded_run(base), guarded_run(opt), base.workload)


def test_speculative_decoding_is_held_to_the_bytes_of_speculation_not_of_one_pass_a_token() -> None:
    """At most 5 tokens a target pass (4 proposals + its own): 47 tokens take >= 10 rounds, each the
    target's weights once and the draft's (first block + head, built here on the meta device) 4 times."""
    from aisp.kits.llm import build_decoder
    from aisp.kits.llm.serving import weight_bytes

    w = load("baseline_speculative_decoding").WORKLOAD
    draft = build_decoder(dataclasses.replace(w.model, layers=w.draft_layers), 0, torch.device("meta"), torch.bfloat16)
    head_and_block = sum(p.numel() * 2 for name, p in draft.named_parameters() if "embed" not in name)
    assert head_and_block == weight_bytes(dataclasses.replace(w.model, layers=1))
    weights = 10 * (weight_bytes(w.model) + 4 * head_and_block)
    assert weights < w.bytes < weights * 1.01  # + the cache a round reads
    assert w.bytes < 0.35 * (w.steps - 1) * weight_bytes(w.model)  # one target pass a token: the old ceiling


def test_speculation_runs_fewer_target_forwards_and_reports_acceptance() -> None:
    forwards = {}
    for module in ("baseline_speculative_decoding", "optimized_speculative_decoding"):
        bench = build(module, 0)
        bench.setup()
        calls, forward = [], bench.model.forward
        bench.model.forward = lambda *a, f=forward, n=calls, **k: n.append(1) or f(*a, **k)
        bench.run()
        forwards[module] = len(calls)
    assert forwards["optimized_speculative_decoding"] < forwards["baseline_speculative_decoding"] / 1.5
    stats = bench.metrics()
    assert 0.3 < stats["acceptance_rate"] < 1.0 and stats["tokens_per_target_pass"] > 1.5


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_round_gives_the_eager_rounds_tokens_with_fewer_syncs(backend: str, monkeypatch) -> None:
    """The ``_compiled`` variant's round traced by torch.compile (on a CPU: aot_eager's trace and
    functionalization, and Inductor's C++ kernels) gives the eager round's tokens, the same rounds
    and acceptance, and reads the GPU's position once per batch of needed rounds, not per round."""
    torch._dynamo.reset()
    monkeypatch.setattr(load("optimized_speculative_decoding_compiled").CompiledRound, "backends", {"cpu": backend})
    eager, compiled = build("optimized_speculative_decoding", 0), build("optimized_speculative_decoding_compiled", 0)
    eager.setup()
    compiled.setup()
    want, reads, to_int = guarded_run(eager), [], torch.Tensor.__int__
    monkeypatch.setattr(torch.Tensor, "__int__", lambda t: reads.append(1) or to_int(t))
    got = guarded_run(compiled)
    assert eager.rounds == compiled.rounds and eager.accepted == compiled.accepted > 0
    assert len(reads) < compiled.rounds
    (_, want_tok), (_, want_top) = want
    (_, got_tok), (_, got_top) = got
    assert torch.equal(want_tok, got_tok)
    torch.testing.assert_close(want_top, got_top, rtol=1e-4, atol=1e-4)
    compare(want, guarded_run(compiled), eager.workload)  # a second call: replays from the same buffers


def test_draft_with_no_miss_agrees_on_every_token() -> None:
    bench = build("optimized_speculative_decoding", 0)
    bench.workload = dataclasses.replace(bench.workload, draft_miss=0.0)
    bench.setup()
    assert bench.metrics()["acceptance_rate"] == 1.0


def test_block_sparse_flops_count_only_kept_pairs() -> None:
    w = build("baseline_block_sparse_attention", 0).workload
    pos = torch.arange(w.seq)
    assert w.kept_pairs() == int(w.visible(pos[:, None], pos[None, :]).sum())
    full = load("baseline_block_sparse_attention").WORKLOAD
    assert full.flops < 0.2 * 4.0 * full.batch * full.heads * full.head_dim * full.seq**2


@pytest.mark.parametrize("variant", TRITON_VARIANTS)
def test_triton_variant_verifies_under_the_interpreter(variant: str) -> None:
    """aisp.kits.sparse_flash at the pair's CPU size (its own 128 x 64 tiles; 32 sink tokens, half a tile:
    the kernel's general sink mask) against the dense-mask baseline in fp32; the fused top-p kernel at
    the sampling pair's CPU size (2 x 3 rows of 300 tokens: a 512-token block, a 512-slot sort), the
    tokens exactly. tests/test_ch16_top_p.py reaches its other paths."""
    pair = TRITON_VARIANTS[variant]
    verify_pair_interpreted(CH16, f"baseline_{pair}", variant, SMALL[pair])


def test_graph_warm_up_leaves_the_prefilled_cache_alone() -> None:
    from ch16_decode import GraphedDecode

    bench = build("baseline_decode_cuda_graph", 0)
    bench.setup()
    bench.first_token()
    before = bench.cache.k[:, :, :, :bench.workload.prompt].clone()
    GraphedDecode(bench.model, bench.cache, bench.workload.batch, bench.cache_len())._prime()
    assert torch.equal(bench.cache.k[:, :, :, :bench.workload.prompt], before)


def test_pipelined_loop_prepares_the_next_step_before_waiting_for_this_one() -> None:
    events = []
    bench = build("optimized_async_scheduling", 0)
    bench.setup()
    sched = bench.scheduler
    prepare, process = sched.prepare, sched.process
    sched.prepare = lambda *a: events.append("prepare") or prepare(*a)
    sched.process = lambda *a: events.append("process") or process(*a)
    bench.run()
    steps = bench.workload.steps
    assert events[:3] == ["prepare", "prepare", "process"]  # step 1 prepared before step 0's tokens are used
    assert events.count("prepare") == events.count("process") == steps


def test_autotuned_block_sparse_variant_computes_as_its_parent_on_a_cpu() -> None:
    from flex_autotune import outputs

    parent, autotuned = outputs(build, "optimized_block_sparse_attention", "optimized_block_sparse_attention_autotuned")
    assert torch.equal(parent, autotuned)


def test_autotuned_block_sparse_variant_compiles_with_max_autotune_on_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a GPU: the device is only read. On a CPU eager flex_attention, as the parent; no
    kernel_options, the sink-and-window mask having neither property."""
    from flex_autotune import AUTOTUNE, CompileRecorder, blocks_are_contiguous, rows_guaranteed_safe
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    recorder = CompileRecorder()
    monkeypatch.setattr(torch, "compile", recorder)
    bench = load("optimized_block_sparse_attention_autotuned").get_benchmark()
    bench.device = torch.device("cuda")
    assert bench.flex() is flex_attention and recorder.calls == [AUTOTUNE]
    bench.device = torch.device("cpu")
    assert bench.flex() is flex_attention and len(recorder.calls) == 1
    w = dataclasses.replace(load("baseline_block_sparse_attention").WORKLOAD, seq=2048)
    mask = create_block_mask(lambda b, h, q, kv: w.visible(q, kv), None, None, w.seq, w.seq, device="cpu")
    assert not rows_guaranteed_safe(mask) and not blocks_are_contiguous(mask)
