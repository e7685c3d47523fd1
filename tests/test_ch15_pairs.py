"""Chapter 15 pairs on a CPU (tiny decoder, same code): every variant gives its baseline's tokens
and logits on two seeds and on refilled inputs, a wrong seed's answer is rejected, every pair file
documents itself, and each optimization does the less work it claims (decode steps, prefilled
tokens, reserved cache); the paged pair's capacity floor replays the kit's scheduler."""

from __future__ import annotations

import ast
import dataclasses
import weakref
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import torch
from conftest import variant_modules
from refill_check import check_refilled_pair, check_two_seeds
from torch.utils._python_dispatch import TorchDispatchMode

import aisp
from aisp.harness.benchmark import unmet_requirements
from aisp.harness.loader import import_module_at
from aisp.kits.llm import (
    ContinuousBatcher,
    Decoder,
    DenseKVCache,
    LLMConfig,
    Request,
    StreamConfig,
    build_decoder,
)

CH15 = Path(__file__).resolve().parents[1] / "ch15"
TINY = LLMConfig(vocab=256, dim=64, layers=2, heads=4, kv_heads=2, ffn=128)
TINY_STREAM = StreamConfig(requests=7, prompt_mean=12, output_mean=5, spread=0.6, max_prompt=24, max_output=10,
                           vocab=256)

SMALL = {
    "kv_cache_reuse": dict(model=TINY, batch=2, prompt=12, steps=5),
    "continuous_batching": dict(model=TINY, stream=TINY_STREAM, slots=3),
    "paged_kv_cache": dict(model=TINY, stream=TINY_STREAM, slots=3, max_context=80, page_size=4, prefill_budget=30),
    "prefix_caching": dict(model=TINY, requests=3, system=16, user=5, page_size=4),
    "chunked_prefill": dict(model=TINY, running=3, context=10, steps=9, long=24, arrive=2, chunk=8),
    "guided_decoding": dict(model=TINY, batch=3, prompt=6, steps=14),
}
"""Per pair, workload sizes that keep a CPU run to a second or two (the two-rank ``_multigpu``
pairs run under torchrun in tests/test_ch15_multigpu.py)."""


def load(module: str) -> ModuleType:
    return import_module_at(CH15 / f"{module}.py")


def pair_files() -> list[tuple[str, str]]:
    return [(b, o) for b, o in variant_modules(CH15) if not b.endswith("_multigpu")]


def build(module: str, seed: int) -> aisp.Benchmark:
    bench = load(module).get_benchmark()
    bench.device, bench.seed = torch.device("cpu"), seed
    name = next(b for b, o in pair_files() if module in (b, o)).removeprefix("baseline_")
    bench.workload = dataclasses.replace(bench.workload, **SMALL[name])
    return bench


def test_every_pair_has_small_sizes() -> None:
    assert sorted({b.removeprefix("baseline_") for b, _ in pair_files()}) == sorted(SMALL)


@pytest.mark.parametrize(("baseline", "optimized"), pair_files())
def test_pair_matches_on_two_seeds_and_rejects_a_wrong_answer(baseline: str, optimized: str) -> None:
    check_two_seeds(build, baseline, optimized)


@pytest.mark.parametrize(("baseline", "optimized"), pair_files())
def test_pair_matches_on_refilled_inputs(baseline: str, optimized: str) -> None:
    check_refilled_pair(build(baseline, 0), build(optimized, 0), build(baseline, 0).workload)


@pytest.mark.parametrize(("baseline", "optimized"), pair_files())
def test_gpu_sized_pairs_skip_on_a_cpu_with_the_reason(baseline: str, optimized: str) -> None:
    workload = load(baseline).WORKLOAD
    reason = unmet_requirements(workload.requires, torch.device("cpu"))
    assert reason and "CUDA" in reason
    assert workload.precision == "bf16" and workload.flops > 0 and workload.items > 0


def test_paged_kv_cache_headlines_memory_and_reserves_less() -> None:
    assert load("baseline_paged_kv_cache").WORKLOAD.headline == "memory"
    opt = load("optimized_paged_kv_cache").get_benchmark()
    opt.requests = opt.workload.requests()  # the H200 sizes; no model needed for the layout
    w = opt.workload
    assert opt.layout().pages * w.page_size * 4 < w.slots * w.max_context


def count_decode_steps(monkeypatch: pytest.MonkeyPatch, module: str) -> int:
    import aisp.kits.llm.engine as engine

    calls = []
    real = engine.decode
    monkeypatch.setattr(engine, "decode", lambda *a, **k: calls.append(1) or real(*a, **k))
    bench = build(module, 0)
    bench.setup()
    bench.run()
    return len(calls)


def test_continuous_batching_runs_fewer_decode_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    static = count_decode_steps(monkeypatch, "baseline_continuous_batching")
    continuous = count_decode_steps(monkeypatch, "optimized_continuous_batching")
    requests = build("baseline_continuous_batching", 0).workload.requests()
    assert continuous < static
    assert continuous >= sum(r.output_len - 1 for r in requests) / 3


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text())) or ""


@pytest.mark.parametrize("path", sorted(CH15.glob("*_*.py")), ids=lambda p: p.stem)
def test_pair_file_documents_itself(path: Path) -> None:
    if not path.stem.startswith(("baseline_", "optimized_")):
        return
    doc = _docstring(path)
    for line in ("Baseline", "Optimized", "Expect", "Run:"):
        assert line in doc, f"{path.name} docstring lacks '{line}'"
    if path.stem.startswith("baseline_"):
        assert "Tolerance:" in doc
    assert len(path.read_text().splitlines()) < 150


def test_chunked_prefill_reports_decode_gaps_and_splits_the_prompt() -> None:
    mixed = {}
    for module in ("baseline_chunked_prefill", "optimized_chunked_prefill"):
        bench = build(module, 0)
        bench.setup()
        forward, sizes = bench.model.hidden_segments, []
        bench.model.hidden_segments = lambda segs, f=forward, n=sizes: n.append(len(segs)) or f(segs)
        bench.run()
        mixed[module] = sizes.count(2)
        stats = bench.metrics()
        assert len(bench.clock.marks) == bench.workload.steps
        assert 0 < stats["decode_gap_p50_ms"] <= stats["decode_gap_max_ms"]
    w = build("baseline_chunked_prefill", 0).workload
    assert mixed == {"baseline_chunked_prefill": 0, "optimized_chunked_prefill": w.long // w.chunk}


def test_guided_decoding_follows_the_grammar_and_masks_the_favourite() -> None:
    outs = {}
    variants = ("optimized_guided_decoding", "optimized_guided_decoding_graph")
    for module in ("baseline_guided_decoding", *variants):
        bench = build(module, 0)
        bench.setup()
        outs[module] = bench.run()
        unconstrained = bench.model(bench.prompts, torch.arange(bench.workload.prompt).expand_as(bench.prompts))
    grammar = bench.grammar
    for module in variants:
        tokens = outs[module][0]
        assert torch.equal(tokens, outs["baseline_guided_decoding"][0]), module
        assert all(grammar.accepts(row) for row in tokens.tolist()), module
    assert not torch.equal(tokens[:, 0], unconstrained[:, -1].argmax(-1)), "the mask changed no first token"


def replayed_cache_tokens(monkeypatch: pytest.MonkeyPatch, lengths: list[tuple[int, int]], slots: int,
                          budget: int) -> list[int]:
    """The kit's ``ContinuousBatcher`` run on the tiny decoder over requests of these (prompt, output)
    lengths: per decode step, the keys/values its serving rows have in the cache, read from the step's
    own arguments (a row's position is the count of tokens it has written before the step)."""
    import aisp.kits.llm.engine as engine

    requests = [Request(i, torch.zeros(p, dtype=torch.long), o, 0.0) for i, (p, o) in enumerate(lengths)]
    cache = DenseKVCache(TINY, slots, max(p + o for p, o in lengths), torch.device("cpu"), torch.float32)
    batcher = ContinuousBatcher(build_decoder(TINY, 0, torch.device("cpu")), cache, slots, None, budget)
    seen, real = [], engine.decode
    def decode(model, cache, tokens, positions, kv_len):
        seen.append(int(positions[batcher.active.bool()].sum()))
        return real(model, cache, tokens, positions, kv_len)
    monkeypatch.setattr(engine, "decode", decode)
    batcher.run(requests)
    return seen


ODD_STREAM = [(5, 1), (12, 3), (3, 6), (9, 1), (7, 4), (2, 2), (11, 5)]
"""Requests of one token (they leave at admission) beside longer ones, for the replay tests."""


@pytest.mark.parametrize(("slots", "budget"), [(2, 12), (3, 100), (7, 20)])
def test_cache_tokens_per_step_replays_the_kit_scheduler(monkeypatch: pytest.MonkeyPatch, slots: int,
                                                         budget: int) -> None:
    replay = load("baseline_paged_kv_cache").cache_tokens_per_step
    assert replay(ODD_STREAM, slots, budget) == replayed_cache_tokens(monkeypatch, ODD_STREAM, slots, budget)


def test_the_replay_check_fires_on_a_schedule_that_ignores_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    replay = load("baseline_paged_kv_cache").cache_tokens_per_step
    assert replay(ODD_STREAM, 7, 10**6) != replayed_cache_tokens(monkeypatch, ODD_STREAM, 7, 20)


def test_paged_kv_cache_declares_weights_and_its_busiest_decode_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """resident_bytes = every bf16 parameter of the decoder at the pair's size + the keys/values of the
    busiest decode step when the kit's scheduler serves the pair's own request set (a tiny decoder
    stands in: the schedule depends on the lengths only)."""
    w = load("baseline_paged_kv_cache").WORKLOAD
    with torch.device("meta"):
        weights = sum(p.numel() * p.element_size() for p in Decoder(w.model).to(torch.bfloat16).parameters())
    per_token = DenseKVCache(w.model, 1, 1, torch.device("meta"), torch.bfloat16).nbytes()
    lengths = [(len(r.prompt), r.output_len) for r in w.requests()]
    busiest = max(replayed_cache_tokens(monkeypatch, lengths, w.slots, w.prefill_budget))
    assert w.resident_bytes == weights + busiest * per_token


def test_row_blocked_mlp_runs_in_row_blocks_and_matches_the_block() -> None:
    """The low-peak variant's MLP sees at most ``rows`` rows a call when a forward has more (a
    prefill), the whole batch otherwise, and gives the kit block's hidden states."""
    kit, blocked = (build_decoder(TINY, 0, torch.device("cpu")) for _ in range(2))
    seen: list[int] = []
    for block in blocked.blocks:
        block.mlp_rows = 8  # as the low-peak variant sets it
        block.gate_up.register_forward_hook(lambda _m, args, _o: seen.append(len(args[0])))
    tokens = torch.randint(TINY.vocab, (3, 17))
    positions = torch.arange(17).expand(3, 17)
    torch.testing.assert_close(blocked.hidden(tokens, positions), kit.hidden(tokens, positions), rtol=1e-5, atol=1e-5)
    assert seen == ([8] * 6 + [3]) * TINY.layers  # 51 rows: 6 blocks of 8 and 3, per layer
    seen.clear()
    blocked.hidden(tokens[:, :2], positions[:, :2])
    assert seen == [6] * TINY.layers


def test_head_major_read_gives_the_kits_keys_in_one_gather() -> None:
    from aisp.kits.llm import PagedKVCache, PageLayout

    variant = load("optimized_paged_kv_cache_lowpeak")
    layout = PageLayout(pages=12, page_size=4, rows=3, max_pages=5)
    kit = PagedKVCache(TINY, layout, torch.device("cpu"), torch.float32)
    ours = variant.HeadMajorPagedKVCache(TINY, layout, torch.device("cpu"), torch.float32)
    for cache in (kit, ours):
        cache.k.copy_(torch.arange(kit.k.numel(), dtype=torch.float32).view_as(kit.k))
        cache.v.copy_(-cache.k)
        for row, pages in enumerate(([3, 1, 7], [2, 9], [11, 4, 5, 6])):
            cache.assign(row, pages)
    positions = torch.tensor([[9], [6], [13]])
    for layer in range(TINY.layers):
        for a, b in zip(ours.bind(positions, 14).read(layer), kit.bind(positions, 14).read(layer), strict=True):
            assert torch.equal(a, b) and a.stride() == b.stride()
    for cache, copies in ((ours, 2), (kit, 4)):  # ours: one gather per K/V; the kit's: a gather and a copy
        step = cache.bind(positions, 14)
        with OpLog() as log:
            step.read(0)
        assert [f.name() for f in log.ops].count("aten::index.Tensor") == 2
        assert len([f for f in log.ops if f.name() in ("aten::index.Tensor", "aten::clone")]) == copies, log.ops


class OpLog(TorchDispatchMode):
    """The aten ops run inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        self.ops.append(func)
        return func(*args, **(kwargs or {}))


def test_lowpeak_variant_with_small_row_blocks_matches_the_baseline() -> None:
    from aisp.harness.verify import compare

    base, opt = build("baseline_paged_kv_cache", 0), build("optimized_paged_kv_cache_lowpeak", 0)
    opt.ffn_rows = 5
    for bench in (base, opt):
        bench.setup()
    assert all(block.mlp_rows == 5 for block in opt.model.blocks)
    compare(guarded_run_pair(base), guarded_run_pair(opt), base.workload)


def guarded_run_pair(bench: aisp.Benchmark) -> list[tuple[str, torch.Tensor]]:
    from aisp.harness.execute import guarded_run

    return guarded_run(bench)


def tensors_in(tree: object) -> Iterator[torch.Tensor]:
    """The tensors in an op's arguments or outputs (lists, tuples and dicts, nested): what
    ``torch.utils._pytree.tree_flatten`` finds there, without its generic node lookup (twice an op, it
    was a fifth of the meta-device test's time)."""
    if isinstance(tree, torch.Tensor):
        yield tree
    elif isinstance(tree, (list, tuple)):
        for item in tree:
            yield from tensors_in(item)
    elif isinstance(tree, dict):
        for item in tree.values():
            yield from tensors_in(item)


class LiveBytes(TorchDispatchMode):
    """The peak bytes of tensors allocated inside it and alive at once (a storage counts from the op
    that makes it until its last tensor dies; views, in-place results and ``external`` storages are
    not allocations): what CUDA's ``max_memory_allocated`` counts, less the allocator's rounding."""

    def __init__(self, external: set[int]) -> None:
        super().__init__()
        self.external, self.refs, self.live, self.peak = external, {}, 0, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        out = func(*args, **(kwargs or {}))
        inputs = list(tensors_in((args, kwargs)))
        for t in tensors_in(out):
            if t._is_view() or any(t is a for a in inputs):
                continue
            key = t.untyped_storage()._cdata
            if key in self.external:
                continue
            if key not in self.refs:
                self.refs[key] = [t.untyped_storage().nbytes(), 0]
                self.live += self.refs[key][0]
                self.peak = max(self.peak, self.live)
            self.refs[key][1] += 1
            weakref.finalize(t, self._drop, key)
        return out

    def _drop(self, key: int) -> None:
        self.refs[key][1] -= 1
        if not self.refs[key][1]:
            self.live -= self.refs.pop(key)[0]


def meta_run_peak(module: str, monkeypatch: pytest.MonkeyPatch) -> int:
    """Peak bytes one ``run()`` of the H200-sized variant allocates, run on the meta device in bf16
    (attention as flash does it: an output the query's size, no score matrix)."""
    import aisp.kits.llm.model as kit_model

    class FlashLike:
        def __getattr__(self, name: str) -> object:
            return getattr(torch.nn.functional, name)

        @staticmethod
        def scaled_dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **_: object) -> torch.Tensor:
            return q.new_empty(*q.shape[:-1], v.shape[-1])

    monkeypatch.setattr(kit_model, "F", FlashLike())
    monkeypatch.setattr(load("optimized_paged_kv_cache"), "dtype_on", lambda _: torch.bfloat16)
    variant = load(module)
    bench, meta = variant.get_benchmark(), torch.device("meta")
    stream_bench = next(c for c in type(bench).__mro__ if c.__name__ == "StreamBenchmark")
    monkeypatch.setattr(stream_bench, "setup", lambda self: None)  # no weights drawn: set below
    bench.device = meta
    with meta:
        bench.model = Decoder(bench.workload.model).to(torch.bfloat16).requires_grad_(False)
    stream = bench.workload.requests()
    bench.prompts = torch.zeros(len(stream), max(len(r.prompt) for r in stream), dtype=torch.long, device=meta)
    bench.requests = [Request(r.rid, bench.prompts[r.rid, :len(r.prompt)], r.output_len, r.arrival) for r in stream]
    bench.setup()  # the variant's own setup only
    mode = LiveBytes({p.untyped_storage()._cdata for p in bench.model.parameters()})
    with mode:
        bench.run()
    return mode.peak


def test_lowpeak_variant_peaks_lower_by_its_transients(monkeypatch: pytest.MonkeyPatch) -> None:
    """At the H200 sizes, counted on the meta device: the paged variant's call peaks in the largest
    prefill group's MLP (pool 138.5 MiB + ~97 MiB), the low-peak one's in a decode step's K/V reads
    (the same pool + ~56 MiB); with the weights and prompts that puts its capacity share over 80%."""
    mib = 2**20
    old = meta_run_peak("optimized_paged_kv_cache", monkeypatch)
    new = meta_run_peak("optimized_paged_kv_cache_lowpeak", monkeypatch)
    assert 230 * mib < old < 240 * mib and 190 * mib < new < 198 * mib, (old / mib, new / mib)
    w = load("baseline_paged_kv_cache").WORKLOAD
    setup = 2 * w.model.params() + 8 * len(w.requests()) * w.stream.max_prompt
    assert w.resident_bytes / (setup + new) > 0.82 > 0.78 > w.resident_bytes / (setup + old)


def test_prefills_declare_the_lm_head_on_each_prompts_last_token_only() -> None:
    """A prefill returns the next token's logits only (the kit's ``prefill``), so its declared FLOPs
    hold the LM head once a prompt: prefix_caching's 2.50 TFLOP, not 3.17 with the head on every token."""
    w = load("baseline_prefix_caching").WORKLOAD
    m = w.model
    blocks = m.params() - 2 * m.vocab * m.dim  # every weight but the embedding and the head
    prefix = 2.0 * w.system * blocks + 4.0 * w.system * w.system / 2 * m.dim * m.layers
    users = (2.0 * w.requests * w.user * blocks + 2.0 * w.requests * m.vocab * m.dim
             + 4.0 * w.requests * w.user * (w.system + w.user / 2) * m.dim * m.layers)
    assert w.flops == pytest.approx(prefix + users) and 2.49e12 < w.flops < 2.51e12
    assert m.prefill_flops(10, 5.0, 2) == m.forward_flops(10, 5.0) - 2.0 * 8 * m.vocab * m.dim
