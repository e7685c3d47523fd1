"""The LLM serving kit on a CPU: every generation loop (static batches, continuous batching over a
dense or a paged cache) gives the tokens and logits of a plain recompute-everything reference;
the caches, the request stream, sampling and the latency counters do what they say."""

from __future__ import annotations

import pytest
import torch

from aisp.kits.llm import (
    SLO,
    TOP,
    ContinuousBatcher,
    DenseKVCache,
    LLMConfig,
    PagedKVCache,
    PageLayout,
    PagePool,
    RequestTimes,
    Segment,
    StreamConfig,
    build_decoder,
    decode,
    greedy_top,
    prefill,
    request_stream,
    static_generate,
    summarize,
    top_p,
)
from aisp.kits.llm.rope import apply_rope, rope_tables, rotate_, rotation

CPU = torch.device("cpu")
CFG = LLMConfig(vocab=512, dim=128, layers=2, heads=4, kv_heads=2, ffn=256)
STREAM = StreamConfig(requests=7, prompt_mean=20, output_mean=6, max_prompt=40, max_output=12, vocab=CFG.vocab)


@pytest.fixture(scope="module")
def model():
    return build_decoder(CFG, 0, CPU)


@pytest.fixture(scope="module")
def reference(model):
    """Per request: the greedy tokens and top logits, recomputing the whole sequence each step."""
    out = []
    for r in request_stream(STREAM, 1):
        seq, steps = r.prompt.clone(), []
        for _ in range(r.output_len):
            token, top = greedy_top(model(seq[None], torch.arange(len(seq))[None])[:, -1], TOP)
            steps.append((int(token), top[0]))
            seq = torch.cat([seq, token])
        out.append(steps)
    return out


def assert_matches(generated, reference) -> None:
    for i, steps in enumerate(reference):
        n = len(steps)
        assert generated.tokens[i, :n].tolist() == [t for t, _ in steps]
        assert (generated.tokens[i, n:] == -1).all() and (generated.top[i, n:] == 0).all()
        torch.testing.assert_close(generated.top[i, :n], torch.stack([v for _, v in steps]), rtol=1e-4, atol=1e-4)


def test_static_batches_match_the_recompute_reference(model, reference):
    cache = DenseKVCache(CFG, 4, STREAM.max_prompt + STREAM.max_output, CPU, torch.float32)
    assert_matches(static_generate(model, cache, request_stream(STREAM, 1), batch=4), reference)


def test_continuous_batching_on_a_dense_cache_matches(model, reference):
    cache = DenseKVCache(CFG, 3, STREAM.max_prompt + STREAM.max_output, CPU, torch.float32)
    assert_matches(ContinuousBatcher(model, cache, 3).run(request_stream(STREAM, 1)), reference)


def test_continuous_batching_on_a_paged_cache_matches_and_returns_every_page(model, reference):
    layout = PageLayout(pages=40, page_size=4, rows=3, max_pages=14)
    pool = PagePool(layout.pages)
    batcher = ContinuousBatcher(model, PagedKVCache(CFG, layout, CPU, torch.float32), 3, pool, prefill_budget=30)
    out = batcher.run(request_stream(STREAM, 1))
    assert_matches(out, reference)
    assert sorted(pool.free) == list(range(1, layout.pages))


def test_paged_and_dense_caches_hold_the_same_keys(model):
    prompts = [torch.arange(11), torch.arange(5, 12)]
    dense = DenseKVCache(CFG, 2, 16, CPU, torch.float32)
    paged = PagedKVCache(CFG, PageLayout(pages=8, page_size=4, rows=2, max_pages=4), CPU, torch.float32)
    paged.assign(0, [5, 2, 7])
    paged.assign(1, [1, 3])
    for cache in (dense, paged):
        prefill(model, cache, prompts)
    positions = torch.arange(11).expand(2, 11)
    for layer in range(CFG.layers):
        kd, vd = dense.bind(positions, 11).read(layer)
        kp, vp = paged.bind(positions, 11).read(layer)
        for row, n in enumerate((11, 7)):
            torch.testing.assert_close(kp[row, :, :n], kd[row, :, :n])
            torch.testing.assert_close(vp[row, :, :n], vd[row, :, :n])


def test_a_cache_that_lost_its_prefix_changes_the_top_logits(model):
    """Why pairs return the top logits too: greedy tokens follow the embedding, the rest of the
    top logits follow the context, so a wrong cache fails verification."""
    prompt = [torch.randint(CFG.vocab, (24,), generator=torch.Generator().manual_seed(3))]
    cache = DenseKVCache(CFG, 1, 32, CPU, torch.float32)
    token, _ = greedy_top(prefill(model, cache, prompt), TOP)
    good = greedy_top(decode(model, cache, token, torch.tensor([24]), 25), TOP)[1]
    cache.k[:, :, :, :12].zero_()
    cache.v[:, :, :, :12].zero_()
    bad = greedy_top(decode(model, cache, token, torch.tensor([24]), 25), TOP)[1]
    assert ((bad - good).abs() / good.abs()).max() > 0.05


def test_greedy_tokens_survive_bf16_rounding():
    cfg = LLMConfig(vocab=2048, dim=256, layers=2, heads=4, kv_heads=1, ffn=512)
    stream = request_stream(StreamConfig(requests=4, prompt_mean=24, output_mean=6, spread=0.0, vocab=cfg.vocab), 2)
    outs = []
    for dtype in (torch.float32, torch.bfloat16):
        model = build_decoder(cfg, 0, CPU, dtype)
        outs.append(static_generate(model, DenseKVCache(cfg, 4, 32, CPU, dtype), stream, 4))
    assert torch.equal(outs[0].tokens, outs[1].tokens)
    torch.testing.assert_close(outs[1].top, outs[0].top, rtol=5e-2, atol=0.1)


def test_multi_head_attention_without_gqa_runs():
    cfg = LLMConfig(vocab=64, dim=32, layers=1, heads=2, kv_heads=2, ffn=64)
    logits = build_decoder(cfg, 0, CPU)(torch.arange(5)[None], torch.arange(5)[None])
    assert logits.shape == (1, 5, 64) and torch.isfinite(logits).all()


def test_config_counts_parameters(model):
    assert CFG.params() == sum(p.numel() for p in model.parameters())
    assert CFG.kv_bytes_per_token(2) == 2 * 2 * 2 * 32 * 2


def test_request_stream_is_seeded_and_bounded():
    cfg = StreamConfig(requests=200, prompt_mean=100, output_mean=20, max_prompt=300, max_output=64, rate=50.0)
    a, b = request_stream(cfg, 7), request_stream(cfg, 7)
    assert [len(r.prompt) for r in a] == [len(r.prompt) for r in b]
    assert all(torch.equal(x.prompt, y.prompt) for x, y in zip(a, b, strict=True))
    assert all(1 <= len(r.prompt) <= 300 and 1 <= r.output_len <= 64 for r in a)
    arrivals = [r.arrival for r in a]
    assert arrivals == sorted(arrivals) and 2.0 < arrivals[-1] < 6.0  # 200 arrivals at 50/s
    assert len({len(r.prompt) for r in a}) > 20
    assert all(r.arrival == 0 for r in request_stream(StreamConfig(requests=5), 0))


def test_top_p_samples_only_the_nucleus():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]])).expand(2000, 4)
    picks = top_p(logits, 0.7, torch.Generator().manual_seed(0))
    assert set(picks.tolist()) == {0, 1}
    assert 0.55 < (picks == 0).float().mean() < 0.70  # 0.5 / 0.8 renormalized
    assert (top_p(logits, 1e-6, torch.Generator().manual_seed(0)) == 0).all()


def test_page_pool_hands_out_and_takes_back_pages():
    pool = PagePool(5)
    pages = pool.allocate(4)
    assert sorted(pages) == [1, 2, 3, 4]
    with pytest.raises(MemoryError):
        pool.allocate(1)
    pool.release(pages[:2])
    assert sorted(pool.allocate(2)) == sorted(pages[:2])


def test_latency_summary():
    a = RequestTimes(arrival=0.0)
    for t in (0.5, 0.6, 0.7):
        a.token(t)
    b = RequestTimes(arrival=1.0)
    for t in (3.0, 3.5):
        b.token(t)
    stats = summarize([a, b], SLO(ttft_s=1.0, tpot_s=0.2))
    assert a.ttft == 0.5 and a.tpot == pytest.approx(0.1) and b.ttft == 2.0
    assert stats["goodput"] == 0.5 and stats["tokens_per_s"] == pytest.approx(5 / 3.5)
    assert stats["ttft_p50_ms"] == pytest.approx(1250.0)


def test_continuous_batcher_reports_every_token_for_latency_counters(model):
    stream = request_stream(STREAM, 1)
    times = {r.rid: RequestTimes(arrival=0.0) for r in stream}
    clock = iter(range(1, 10_000))
    batcher = ContinuousBatcher(model, DenseKVCache(CFG, 3, 52, CPU, torch.float32), 3)
    batcher.on_tokens = lambda rids: [times[rid].token(float(t)) for t in [next(clock)] for rid in rids]
    batcher.run(stream)
    assert [len(times[r.rid].tokens) for r in stream] == [r.output_len for r in stream]
    assert times[0].ttft == 1.0  # admitted (and prefilled) first
    assert times[0].tpot > 1.0  # its decode steps are interleaved with the prefills of later requests
    stats = summarize(list(times.values()), SLO(ttft_s=1e9, tpot_s=1e9))
    assert stats["goodput"] == 1.0 and stats["tokens_per_s"] > 0


def test_a_mixed_forward_equals_its_segments_run_apart(model):
    """Decode rows and a prefill chunk in one forward (shared matmuls, attention per segment) give
    what two forwards give, and leave the same keys in the cache."""
    gen = torch.Generator().manual_seed(5)
    prompts = [torch.randint(CFG.vocab, (10,), generator=gen) for _ in range(2)]
    chunks = torch.randint(CFG.vocab, (1, 12), generator=gen)
    caches = [DenseKVCache(CFG, 3, 16, CPU, torch.float32) for _ in range(2)]
    decode_pos, chunk_pos = torch.tensor([[10], [10]]), torch.arange(6, 12)[None]
    tokens = torch.tensor([[3], [4]])
    apart, mixed = [], []
    for cache in caches:
        prefill(model, cache, prompts)
        prefill(model, cache, [chunks[0, :6]], rows=torch.tensor([2]))
    apart.append(model.hidden(tokens, decode_pos, caches[0].bind(decode_pos, 11)))
    apart.append(model.hidden(chunks[:, 6:], chunk_pos, caches[0].bind(chunk_pos, 12, rows=torch.tensor([2]))))
    mixed = model.hidden_segments([Segment(tokens, decode_pos, caches[1].bind(decode_pos, 11)),
                                   Segment(chunks[:, 6:], chunk_pos, caches[1].bind(chunk_pos, 12, torch.tensor([2])))])
    for a, m in zip(apart, mixed, strict=True):
        torch.testing.assert_close(m, a, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(caches[1].k, caches[0].k)
    whole = DenseKVCache(CFG, 1, 16, CPU, torch.float32)
    prefill(model, whole, [chunks[0]])
    torch.testing.assert_close(caches[0].k[:, 2, :, :12], whole.k[:, 0, :, :12], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("paged", [False, True])
def test_a_tail_chunk_attends_as_the_masked_path_does(model, paged):
    """A chunk bound with ``tail`` (its positions end at kv_len - 1: lower-right causal attention over
    the cache, no mask) gives the masked path's hidden states and keys, alone and in a mixed forward."""
    gen = torch.Generator().manual_seed(6)
    prompt, tokens = torch.randint(CFG.vocab, (1, 14), generator=gen), torch.tensor([[3], [4]])
    caches = []
    for _ in range(2):
        if paged:
            cache = PagedKVCache(CFG, PageLayout(pages=16, page_size=4, rows=3, max_pages=5), CPU, torch.float32)
            for row, pages in enumerate(([1, 2, 3], [4, 5, 6], [9, 7, 12, 10])):
                cache.assign(row, pages)
        else:
            cache = DenseKVCache(CFG, 3, 16, CPU, torch.float32)
        prefill(model, cache, [prompt[0, :5], prompt[0, 2:8]])
        prefill(model, cache, [prompt[0, :6]], rows=torch.tensor([2]))
        caches.append(cache)
    chunk_pos, decode_pos, rows = torch.arange(6, 14)[None], torch.tensor([[5], [6]]), torch.tensor([2])
    masked = model.hidden(prompt[:, 6:], chunk_pos, caches[0].bind(chunk_pos, 14, rows))
    tail = model.hidden_segments([Segment(tokens, decode_pos, caches[1].bind(decode_pos, 7)),
                                  Segment(prompt[:, 6:], chunk_pos, caches[1].bind(chunk_pos, 14, rows, tail=True))])[1]
    torch.testing.assert_close(tail, masked, rtol=1e-5, atol=1e-5)
    k = [c.bind(chunk_pos, 14, rows).read(1)[0] for c in caches]
    torch.testing.assert_close(k[1], k[0])
    whole = model.hidden(prompt, torch.arange(14)[None])
    torch.testing.assert_close(tail, whole[:, 6:], rtol=1e-4, atol=1e-4)


def test_in_place_rope_matches_the_fp32_reference():
    positions = torch.tensor([0, 3, 700, 9000])
    x = torch.randn(4, 6, CFG.head_dim, generator=torch.Generator().manual_seed(0))
    cos, sin = rope_tables(CFG, positions[None])
    reference = apply_rope(x[None], cos, sin)[0]
    rotated = x.clone()
    rotate_(rotated, *rotation(CFG, positions, torch.float32))
    torch.testing.assert_close(rotated, reference, rtol=1e-5, atol=1e-5)
