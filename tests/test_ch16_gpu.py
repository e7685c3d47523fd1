"""Chapter 16 on a GPU: each pair (every variant) verifies at its H200 size (the harness does the
timing), the fp8 attention kernel matches SDPA over the dequantized cache at the pair's shapes, the
fp8 GEMV matches fp64 at the decoder's linear shapes (both fp8 kernels' times printed), the
pipelined scheduler keeps the GPU busier, the draft's acceptance rate is what the README says, and
the fused top-p kernel draws torch's token on many rows."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import variant_modules
from cuda_events import timed_ms

from aisp.harness.execute import guarded_run
from aisp.harness.loader import import_module_at
from aisp.harness.verify import compare

CH16 = Path(__file__).resolve().parents[1] / "ch16"
PAIRS = ["decode_cuda_graph", "speculative_decoding", "fp8_kv_cache", "fp8_weight_decode", "gpu_sampling",
         "async_scheduling", "block_sparse_attention"]
pytestmark = pytest.mark.gpu


def load(module: str):
    return import_module_at(CH16 / f"{module}.py")


def cuda_bench(module: str):
    bench = load(module).get_benchmark()
    bench.device = torch.device("cuda")
    bench.setup()
    return bench


@pytest.mark.parametrize(("name", "variant"), [(name, opt) for name in PAIRS for base, opt in variant_modules(CH16)
                                                if base == f"baseline_{name}"])
def test_pair_verifies_at_full_size(name: str, variant: str) -> None:
    outs = []
    for module in (f"baseline_{name}", variant):
        bench = cuda_bench(module)
        outs.append(guarded_run(bench))
        outs.append(guarded_run(bench))  # a second call (graph replays, reset scheduler) gives the same
        bench.teardown()
    compare(outs[0], outs[1], load(f"baseline_{name}").WORKLOAD)
    compare(outs[0], outs[2], load(f"baseline_{name}").WORKLOAD)
    compare(outs[2], outs[3], load(f"baseline_{name}").WORKLOAD)


def test_fp8_attention_matches_sdpa_on_the_dequantized_cache() -> None:
    """Both V layouts at 8 rows of the pair's context; then both at the pair's size, their times and
    HBM rates printed (run with -s)."""
    sys.path.insert(0, str(CH16))
    from ch16_fp8_kv import block_values, fp8_decode_attention, quantize_heads

    gen = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(8, 8, 4, 128, generator=gen, device="cuda").bfloat16()
    k, v = (torch.randn(8, 8, 8192, 128, generator=gen, device="cuda").bfloat16() for _ in range(2))
    (k8, ks), (v8, vs) = quantize_heads(k), quantize_heads(v)
    e4m3 = torch.float8_e4m3fn
    ref = F.scaled_dot_product_attention(q.float(), k8.view(e4m3).float() * ks[:, None, None],
                                         v8.view(e4m3).float() * vs[:, None, None])
    for values in (v8, block_values(v8)):
        out = fp8_decode_attention(q, k8.view(e4m3), values.view(e4m3), ks, vs, 16)
        torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=1e-3)
    for module in ("optimized_fp8_kv_cache", "optimized_fp8_kv_cache_v_blocks"):
        bench = cuda_bench(module)
        ms = timed_ms(bench.run, reps=50)
        print(f"\n{module}: {ms * 1e3:.1f} us, {bench.workload.bytes / ms / 1e9:.2f} TB/s")


def test_pipelined_scheduler_keeps_the_gpu_busier() -> None:
    busy = {side: cuda_bench(f"{side}_async_scheduling").metrics()["gpu_busy"] for side in ("baseline", "optimized")}
    assert 0 < busy["baseline"] < busy["optimized"] <= 1.05, busy


def test_draft_acceptance_rate() -> None:
    stats = cuda_bench("optimized_speculative_decoding").metrics()
    assert 0.3 < stats["acceptance_rate"] < 0.9 and stats["tokens_per_target_pass"] > 1.8, stats


LINEARS = {"qkv": (6144, 4096), "out": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336),
           "head": (32000, 4096)}
"""(N, K) of fp8_weight_decode's linear layers (width 4096, 32 + 2 x 8 heads of 128, SwiGLU 14,336)."""


def graphed(fn):
    """``fn`` (compiled by one eager call) captured in a CUDA graph, as the decode step runs it: the
    replay, so that the times are the kernels', not the host's launches."""
    fn()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


@pytest.mark.parametrize("rows", [1, 8, 16])
def test_fp8_gemv_matches_fp64_at_the_decoders_shapes(rows: int) -> None:
    """Both fp8 kernels against x @ (w8 * scale)^T in fp64 (x bf16 rounded through fp16 as both
    cast it); each linear's time per graphed call (the kit's with its fp16 cast of x, as its layer
    runs it) and the weight bytes' rate printed for the lead."""
    sys.path.insert(0, str(CH16))
    from ch16_fp8_gemv import fp8_gemv

    from aisp.kits.fp8 import fp8_linear, quantize_rows

    torch.manual_seed(0)
    for name, (n, k) in LINEARS.items():
        w8, scale = quantize_rows(torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02)
        w = w8.view(torch.float8_e4m3fn)
        x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
        ref = x.half().double() @ (w.double() * scale.double()[:, None]).T
        new = fp8_gemv(x, w, scale)
        err = ((new.double() - ref).norm() / ref.norm()).item()
        assert new.dtype == torch.bfloat16 and err < 5e-3, (name, err)  # bf16 output rounding
        ms_new = timed_ms(graphed(lambda x=x, w=w, s=scale: fp8_gemv(x, w, s)), reps=50)
        ms_old = timed_ms(graphed(lambda x=x, w=w, s=scale: fp8_linear(x.half(), w, s, False, torch.bfloat16)), reps=50)
        print(f"{name} M={rows} N={n} K={k}: kit {ms_old * 1e3:.1f} us ({n * k / ms_old / 1e9:.2f} TB/s), "
              f"gemv {ms_new * 1e3:.1f} us ({n * k / ms_new / 1e9:.2f} TB/s), rel err {err:.1e}")


def test_host_and_gpu_sampling_draw_the_same_tokens_on_many_rows() -> None:
    """2,048 rows of the pair's logits (fp32, spread 4, 32,000 tokens): the float64 race on the host
    and on the GPU draws the same token in every row (in fp32 a row differed in ~3-6e-6 of rows)."""
    mod = load("baseline_gpu_sampling")
    logits = 4.0 * torch.randn(2048, 32000, generator=torch.Generator().manual_seed(7))
    keys = torch.arange(logits.numel()).view(logits.shape)
    host = mod.top_p_race(logits, 0.9, keys)
    gpu = mod.top_p_race(logits.cuda(), 0.9, keys.cuda()).cpu()
    assert torch.equal(host, gpu), f"{int((host != gpu).sum())} of 2048 rows differ"


def test_fused_top_p_draws_the_torch_token_on_many_rows() -> None:
    """gpu_sampling's ``_fused`` kernel against ``top_p_race`` on the GPU, token for token: 2,048 of the
    pair's peaked rows at three values of p, 64 flat rows (its slow path), 64 rows of quarter-step ties,
    at each of 8, 16 and 32 warps a program."""
    sys.path.insert(0, str(CH16))
    from ch16_top_p import BUFFER, top_p_race_rows

    mod = load("baseline_gpu_sampling")
    gen = torch.Generator(device="cuda").manual_seed(11)
    peaked = 4.0 * torch.randn(2048, 32000, generator=gen, device="cuda")
    flat = 0.1 * torch.randn(64, 32000, generator=gen, device="cuda")
    ties = torch.round(4.0 * torch.randn(64, 32000, generator=gen, device="cuda")) / 4
    for logits in (peaked, flat, ties):
        rows = logits.shape[0]
        keys = (3 * 32000 + torch.arange(logits.numel(), device="cuda")).view(logits.shape)
        scratch = torch.empty(rows * BUFFER, dtype=torch.int64, device="cuda")
        for p in (0.9, 0.5, 0.99):
            want = mod.top_p_race(logits, p, keys)
            for warps in (8, 16, 32):
                got = top_p_race_rows(logits, torch.tensor([p], dtype=torch.float64, device="cuda"), 3,
                                      torch.empty(rows, dtype=torch.int64, device="cuda"), scratch, num_warps=warps)
                assert torch.equal(want, got), f"p {p}, {warps} warps: {int((want != got).sum())} of {rows} rows differ"


def test_fused_decode_kernels_match_torch_at_the_pairs_shapes() -> None:
    """``_fused``'s attention (8 rows at positions 512..527 of 529 bf16 slots, 8 K/V heads of 4 query
    heads) against SDPA with the mask; its top-k kernel against torch.topk on 8 x 32,000 bf16 logits."""
    import math

    sys.path.insert(0, str(CH16))
    from ch16_fp8_kv import _combine
    from ch16_fused_decode import BLOCK_KEYS, SPLIT_LEN, _attend, _top_feedback

    gen = torch.Generator(device="cuda").manual_seed(0)
    rows, kvh, groups, dim, slots, splits = 8, 8, 4, 128, 529, 8
    q = torch.randn(rows, kvh * groups, dim, generator=gen, device="cuda").bfloat16()
    k, v = (torch.randn(rows, kvh, slots, dim, generator=gen, device="cuda").bfloat16() for _ in range(2))
    pos = 512 + 2 * torch.arange(rows, device="cuda")
    parts = torch.empty(rows * kvh * groups * splits, dim, device="cuda")
    ml = torch.empty(rows * kvh * groups * splits, 2, device="cuda")
    _attend[(rows * kvh, splits)](q, k, v, pos, parts, ml, slots, math.log2(math.e) / dim**0.5, KV_HEADS=kvh,
                                  GROUPS=groups, G_PAD=16, D=dim, SPLIT_LEN=SPLIT_LEN, BLOCK_N=BLOCK_KEYS,
                                  num_warps=4, num_stages=2)
    out = torch.empty_like(q)
    _combine[(rows * kvh * groups,)](parts, ml, torch.ones(kvh, device="cuda"), out, KV_HEADS=kvh, SPLITS=splits,
                                     GROUPS=groups, D=dim, num_warps=4)
    visible = torch.arange(slots, device="cuda")[None, :] <= pos[:, None]
    ref = F.scaled_dot_product_attention(q.float().view(rows, kvh, groups, dim), k.float(), v.float(),
                                         attn_mask=visible[:, None, None])
    torch.testing.assert_close(out.float().view_as(ref), ref, rtol=2e-2, atol=2e-2)
    logits = torch.randn(rows, 32000, generator=gen, device="cuda").bfloat16() * 4
    top = torch.zeros(rows, 4, device="cuda")
    nxt, tok, p = (torch.zeros(rows, dtype=torch.long, device="cuda") for _ in range(3))
    _top_feedback[(rows,)](logits, top, nxt, tok, p, 32000, TOP=4, BLOCK=32768, num_warps=16)
    values = logits.topk(4).values.float()
    assert torch.equal(top, values) and torch.equal(nxt, tok) and p.tolist() == [1] * rows
    assert torch.equal(logits.gather(1, nxt[:, None]).float()[:, 0], values[:, 0])


def test_fused_decode_step_matches_the_gemv_step_at_full_size() -> None:
    """``_fused`` against ``_gemv`` (the same e4m3 weights and GEMV, the kit's step around it): the same
    tokens, top logits within the pair's tolerance and 1.0 of each other (bf16 logits near 10-16 step
    by 0.06-0.125); both calls' times printed (run with -s)."""
    outs = {}
    for variant in ("optimized_fp8_weight_decode_gemv", "optimized_fp8_weight_decode_fused"):
        bench = cuda_bench(variant)
        outs[variant] = guarded_run(bench)
        ms = timed_ms(bench.run, reps=20)
        print(f"\n{variant}: {ms:.3f} ms a call (16 steps), {bench.workload.bytes / ms / 1e9:.2f} TB/s")
        bench.teardown()
    (tokens, top), (fused_tokens, fused_top) = ([t for _, t in out] for out in outs.values())
    assert torch.equal(tokens, fused_tokens)
    err = (top - fused_top).abs().max().item()
    print(f"top-4 logits: max difference {err:.3f} (rms {top.pow(2).mean().sqrt().item():.2f})")
    compare(*outs.values(), load("baseline_fp8_weight_decode").WORKLOAD)
    assert err < 1.0, err


def test_fused_tp_decode_at_one_shard_matches_the_baseline() -> None:
    """``tp_decode_multigpu``'s ``_fused`` step at one shard (the whole 70B-wide decoder on one GPU: 64
    query / 8 K/V heads, SwiGLU 28,672, the whole vocabulary; no collective) against the baseline's
    graphed decode at full size: the same tokens, top logits at the pair's tolerance; both calls'
    times printed (run with -s; the 2-rank path is verified by ``aisp bench run``)."""
    outs = []
    for module in ("baseline_tp_decode_multigpu", "optimized_tp_decode_multigpu_fused"):
        bench = load(module).get_benchmark()
        bench.device, bench.shards = torch.device("cuda"), 1
        bench.setup()
        outs.append(guarded_run(bench))
        print(f"\n{module} at one shard: {timed_ms(bench.run, reps=10):.3f} ms a call (16 steps)")
        bench.teardown()
    (tokens, top), (fused_tokens, fused_top) = ([t for _, t in out] for out in outs)
    assert torch.equal(tokens, fused_tokens)
    print(f"top-4 logits: max difference {(top - fused_top).abs().max().item():.3f}")
    compare(*outs, load("baseline_tp_decode_multigpu").WORKLOAD)


@pytest.mark.multigpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_push_and_push_pdl_verify_on_two_gpus(tmp_path) -> None:
    """``tp_decode_multigpu``'s ``_push`` and ``_push_pdl`` (its Triton kernels launched with PDL, the
    flags and pushes after each kernel's wait) through the harness on two GPUs (torchrun, two ranks,
    verification only, two seeds): each rank's tokens and top logits match that rank's baseline; a
    broken flag order would fail it or raise in the warm-up (a flag that times out sets ``err``)."""
    from aisp.harness.discovery import resolve_targets
    from aisp.harness.options import RunOptions
    from aisp.harness.runner import run_suite

    names = ("optimized_tp_decode_multigpu_push", "optimized_tp_decode_multigpu_push_pdl")
    (pair,) = resolve_targets(["ch16:tp_decode_multigpu"], CH16.parent)
    pair = dataclasses.replace(pair, optimized=tuple(p for p in pair.optimized if p.stem in names))
    (result,), _ = run_suite([pair], RunOptions(verify_only=True, artifacts_dir=tmp_path))
    variants = {v["name"]: v for v in result["variants"]}
    assert sorted(variants) == sorted(names), (result.get("reason"), sorted(variants))
    for name in names:
        assert variants[name]["verdict"] in ("ok", "inconclusive", "slower"), (name, variants[name]["reason"])
        assert "each of 2 ranks: matches that rank's baseline" in variants[name]["verification"]["checks"], name
