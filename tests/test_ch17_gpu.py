"""Chapter 17 on a GPU: each one-GPU pair verifies at its H200 size, every variant against the
baseline and against its own second call (the harness does the timing); ``torch._grouped_mm`` is
present on the GPU's torch and agrees with the padded bmm at the pair's shapes; the priority
streams lower the decode gap; the batched decode reads the weights once, its compiled steps trace
whole and replay new tokens as the eager step decodes them, and the Triton decode attention and
top-k (ch17_decode.py) match their references at the pair's shapes. On two GPUs (marker
``multigpu``) both two-rank pairs verify through the harness and the locality planner crosses less."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import REPO, assert_replay_follows_new_tokens, variant_modules
from torch._dynamo.utils import counters

from aisp.harness.execute import guarded_run
from aisp.harness.loader import import_module_at
from aisp.harness.verify import compare, detach_copy
from aisp.kits import moe
from aisp.kits import moe_swiglu as swi
from aisp.kits.moe_gather import gather_swiglu
from aisp.kits.moe_schedule import device_route, schedule

CH17 = Path(__file__).resolve().parents[1] / "ch17"
ONE_GPU = [(b, o) for b, o in variant_modules(CH17) if not b.endswith("_multigpu")]
pytestmark = pytest.mark.gpu


def load(module: str):
    return import_module_at(CH17 / f"{module}.py")


def cuda_bench(module: str):
    bench = load(module).get_benchmark()
    bench.device = torch.device("cuda")
    bench.setup()
    return bench


@pytest.mark.parametrize(("baseline", "optimized"), ONE_GPU)
def test_variant_verifies_at_full_size(baseline: str, optimized: str) -> None:
    outs = []
    for module in (baseline, optimized):
        bench = cuda_bench(module)
        outs += [guarded_run(bench), guarded_run(bench)]
        bench.teardown()
        del bench
        torch.cuda.empty_cache()
    workload = load(baseline).WORKLOAD
    compare(outs[0], outs[1], workload)
    compare(outs[0], outs[2], workload)
    compare(outs[2], outs[3], workload)


def test_grouped_mm_is_there_and_matches_padded_bmm() -> None:
    assert moe.HAS_GROUPED_MM, f"torch {torch.__version__} lacks _grouped_mm: the pair falls back to padded bmm"
    w = load("baseline_moe_grouped_gemm").WORKLOAD
    gen = torch.Generator(device="cuda").manual_seed(0)
    ids = torch.randint(w.experts, (w.tokens, w.top_k), generator=gen, device="cuda")
    order, counts = moe.sort_by_expert(ids, w.experts)
    xs = torch.randn(len(order), w.dim, generator=gen, device="cuda").bfloat16()
    w1, w2 = moe.expert_weights(w.experts, w.dim, w.ffn, gen, torch.device("cuda"), torch.bfloat16)
    grouped = moe.grouped_ffn(xs, counts, w1, w2).float()
    padded = moe.padded_ffn(xs, ids.reshape(-1)[order], counts, w1, w2).float()
    assert ((grouped - padded).norm() / padded.norm()).item() < 1e-2


def test_fused_swiglu_gemm_and_swiglu_rows_match_torch_at_the_pair_shapes() -> None:
    """aisp.kits.moe_swiglu at the pair's sizes (131,072 sorted rows, 64 experts, dim 2,048, ffn 1,024;
    an empty expert, groups ending mid-block): the grouped up GEMM with the SwiGLU epilogue and the row
    pass against ``_grouped_mm`` + ``swiglu`` (bf16 rounding of the intermediate: a relative norm under
    1e-2)."""
    w = load("baseline_moe_grouped_gemm").WORKLOAD
    gen = torch.Generator(device="cuda").manual_seed(0)
    ids = torch.randint(w.experts, (w.tokens, w.top_k), generator=gen, device="cuda")
    ids[ids == 5] = 6
    order, counts = moe.sort_by_expert(ids, w.experts, count_on_device=True)
    xs = torch.randn(len(order), w.dim, generator=gen, device="cuda").bfloat16()
    w1, _ = moe.expert_weights(w.experts, w.dim, w.ffn, gen, torch.device("cuda"), torch.bfloat16)
    h = torch._grouped_mm(xs, w1, offs=counts.cumsum(0).to(torch.int32))
    want = moe.swiglu(h.float())
    for got in (swi.grouped_swiglu(xs, w1, schedule(counts, swi.BM)), swi.swiglu_rows(h)):
        assert got.shape == want.shape and got.dtype == torch.bfloat16
        assert ((got.float() - want).norm() / want.norm()).item() < 1e-2


def test_gather_swiglu_matches_the_up_gemm_on_the_gathered_rows_at_the_pair_shapes() -> None:
    """aisp.kits.moe_gather.gather_swiglu at the pair's sizes (16,384 tokens, top-8, an empty expert) over
    device_route's order and schedule: what grouped_swiglu gives on the gathered copy ``x[order // top_k]``
    (the same tiles and products: a relative norm under 1e-3), and ``_grouped_mm`` + ``swiglu`` (under 1e-2)."""
    w = load("baseline_moe_grouped_gemm").WORKLOAD
    gen = torch.Generator(device="cuda").manual_seed(0)
    ids = torch.randint(w.experts, (w.tokens, w.top_k), generator=gen, device="cuda")
    ids[ids == 5] = 6
    order, _, sched = device_route(ids.reshape(-1), torch.rand(ids.numel(), device="cuda"), w.experts, swi.BM)
    x = torch.randn(w.tokens, w.dim, generator=gen, device="cuda").bfloat16()
    w1, _ = moe.expert_weights(w.experts, w.dim, w.ffn, gen, torch.device("cuda"), torch.bfloat16)
    xs = x[order.long() // w.top_k]
    got = gather_swiglu(x, order, w.top_k, w1, sched).float()
    same = swi.grouped_swiglu(xs, w1, sched).float()
    want = moe.swiglu(torch._grouped_mm(xs, w1, offs=sched[0, 1:]).float())
    assert got.shape == want.shape == (w.tokens * w.top_k, w.ffn)
    assert ((got - same).norm() / same.norm()).item() < 1e-3
    assert ((got - want).norm() / want.norm()).item() < 1e-2


def test_topk_route_matches_torch_topk_and_the_stable_sort_at_the_pair_shapes() -> None:
    """aisp.kits.moe_topk_route at the pair's sizes on the pair's bf16 router logits (~4% of tokens hold equal
    logits at the 8th place): each token's 8 experts are the ones ``torch.topk`` picks on CUDA (the tie rule),
    their gates ``route``'s, the order argsort's (stable), its inverse, the schedule ``schedule``'s."""
    from aisp.kits.moe_topk_route import topk_route
    bench = cuda_bench("baseline_moe_grouped_gemm")
    w = bench.workload
    want_ids, want_gates = moe.route(bench.x, bench.w_router, w.top_k)
    ids, gates, order, row, sched = topk_route(bench.x @ bench.w_router, w.top_k, swi.BM)
    got_ids, i = ids.long().sort(dim=1)
    ref_ids, j = want_ids.sort(dim=1)
    assert torch.equal(got_ids, ref_ids), (got_ids != ref_ids).any(dim=1).sum().item()
    torch.testing.assert_close(gates.gather(1, i), want_gates.gather(1, j), rtol=1e-5, atol=1e-6)
    flat = ids.reshape(-1).long()
    assert torch.equal(order.long(), flat.argsort(stable=True))
    assert torch.equal(row[order.long()], torch.arange(flat.numel(), device="cuda", dtype=torch.int32))
    assert torch.equal(sched, schedule(torch.bincount(flat, minlength=w.experts), swi.BM))


@pytest.mark.parametrize("module", ["optimized_moe_grouped_gemm_graph", "optimized_moe_grouped_gemm_fused_swiglu",
                                    "optimized_moe_grouped_gemm_fused_gather", "optimized_moe_grouped_gemm_fused_route"])
def test_graphed_moe_replays_new_tokens(module: str) -> None:
    """The call captured in setup, replayed after new tokens are written into x in place, gives what the
    eager call gives for them."""
    assert_replay_follows_new_tokens(cuda_bench(module), load("baseline_moe_grouped_gemm").WORKLOAD)


def test_priority_streams_lower_the_decode_gap() -> None:
    gaps = {}
    for module in ("baseline_prefill_decode_priority", "optimized_prefill_decode_priority"):
        bench = cuda_bench(module)
        for _ in range(2):  # the first call warms up kernels and the allocator
            bench.run()
        gaps[module] = bench.metrics()["decode_gap_p99_ms"]
    assert gaps["optimized_prefill_decode_priority"] < 0.7 * gaps["baseline_prefill_decode_priority"], gaps


def test_batched_decode_reads_the_weights_once() -> None:
    stats = cuda_bench("optimized_decode_batching_roofline").metrics()
    assert stats["weight_reads"] == 1 and 60 < stats["intensity_flop_per_byte"] < 80, stats


@pytest.mark.parametrize("module", ["optimized_decode_batching_roofline_compiled",
                                    "optimized_decode_batching_roofline_compiled_triton"])
def test_compiled_decode_graph_has_no_break_and_reads_new_tokens(module: str) -> None:
    """The compiled step traced whole (no graph break) and captured; a replay after new tokens are
    written at the captured address gives what the eager batched step gives for them."""
    counters.clear()
    bench = cuda_bench(module)
    assert bench.step.graph is not None and not counters["graph_break"], dict(counters["graph_break"])
    bench.tokens.copy_(bench.tokens.roll(1))
    replayed = bench.run()
    eager = load("optimized_decode_batching_roofline").Together.run(bench)
    compare(detach_copy(eager), detach_copy(replayed), load("baseline_decode_batching_roofline").WORKLOAD)


def test_decode_attend_kernel_matches_the_reference_at_the_pair_shapes() -> None:
    """ch17_decode's Triton attention (bf16, 64 rows x 8 K/V heads x 8 query heads, head dim 128)
    against its PyTorch reference in fp32 on a CPU: rows at positions 0, tile edges, 512 (the
    pair's) and the last slot; the new keys and values written at those slots and nowhere else."""
    decode = import_module_at(CH17 / "ch17_decode.py")
    gen = torch.Generator(device="cuda").manual_seed(0)
    ck, cv = (torch.randn(2, 64, 8, 520, 128, generator=gen, device="cuda").bfloat16() for _ in range(2))
    positions = torch.full((64, 1), 512, device="cuda")
    positions[:6, 0] = torch.tensor([0, 1, 63, 64, 300, 519])
    q, k, v = torch.randn(64, 80, 128, generator=gen, device="cuda").bfloat16().split([64, 8, 8], dim=1)
    want_k, want_v = ck.float().cpu(), cv.float().cpu()
    want = decode.decode_attend(want_k, want_v, 1, positions.cpu(), *(t.float().cpu() for t in (q, k, v)))
    got = decode.decode_attend(ck, cv, 1, positions, q, k, v)
    torch.cuda.synchronize()
    assert torch.equal(ck.float().cpu(), want_k) and torch.equal(cv.float().cpu(), want_v)
    torch.testing.assert_close(got.float().cpu(), want, atol=2e-2, rtol=2e-2)


def test_top_logits_kernels_match_topk() -> None:
    decode = import_module_at(CH17 / "ch17_decode.py")
    logits = torch.randn(64, 32000, generator=torch.Generator(device="cuda").manual_seed(1), device="cuda").bfloat16()
    logits[2, 31999] = logits[4, 0] = 9.0  # a row's maximum in its last and its first chunk
    token, top = decode.top_logits(logits, 4)
    assert torch.equal(top, logits.topk(4).values.float()) and top.dtype == torch.float32
    assert torch.equal(logits.float().gather(1, token[:, None])[:, 0], top[:, 0]) and token[2] == 31999 and token[4] == 0


@pytest.mark.multigpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_two_rank_pairs_verify_on_two_gpus(tmp_path) -> None:
    from aisp.harness.discovery import resolve_targets
    from aisp.harness.options import RunOptions
    from aisp.harness.runner import run_suite

    options = RunOptions(iterations=5, warmup=2, artifacts_dir=tmp_path)
    targets = ["ch17:topology_aware_moe_multigpu", "ch17:pipeline_inference_multigpu"]
    results = {r["name"]: r for r in run_suite(resolve_targets(targets, REPO), options)[0]}
    for result in results.values():  # every variant (the pipeline's NCCL and copy-engine hand-offs)
        for opt in result["variants"]:
            assert opt["verdict"] in ("ok", "inconclusive", "slower"), (opt["name"], opt["reason"])
            assert "each of 2 ranks: matches that rank's baseline" in opt["verification"]["checks"], opt["name"]
    pipe = {v["name"]: v for v in results["pipeline_inference_multigpu"]["variants"]}
    assert pipe["optimized_pipeline_inference_multigpu_copyengine"]["metrics"]["bubble_fraction"] == 1 / 17
    topo = results["topology_aware_moe_multigpu"]
    assert topo["variants"][0]["metrics"]["remote_share"] < 0.5 * topo["baseline"]["metrics"]["remote_share"]
