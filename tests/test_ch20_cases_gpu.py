"""Chapter 20's MoE-layer and vision-pipeline case studies on a GPU: every stage verifies against its
baseline at the H200 size (the pair's tolerance; the harness does the timing; the errors are printed),
the grouped and fused stages never sync the host (the graphed stages' eager calls too), the graphed stages replay new tokens as
their eager call computes them, the gather combine matches ``ch20_moe.combine`` at the pair's shapes, stage 5's
routing kernels pick the baseline's experts (torch.topk's ties) and stage 4's order, and the GPU-decode stages decode with nvJPEG (or skip with
the reason where torchvision is missing)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import assert_replay_follows_new_tokens, built_on_cuda, verify_stages_on_cuda

from aisp.harness.loader import import_module_at

CH20 = Path(__file__).resolve().parents[1] / "ch20"
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]
MOE = ["optimized_moe_layer_e2e_s1_sorted_routing", "optimized_moe_layer_e2e_s2_grouped_gemm",
       "optimized_moe_layer_e2e_s3_fused_swiglu", "optimized_moe_layer_e2e_s4_fused_gather",
       "optimized_moe_layer_e2e_s5_device_route"]
VISION = ["optimized_vision_pipeline_e2e_s1_uint8_pinned", "optimized_vision_pipeline_e2e_s2_gpu_decode",
          "optimized_vision_pipeline_e2e_s3_channels_last"]


def built(module: str, seed: int = 0):
    return built_on_cuda(CH20 / f"{module}.py", seed)


@pytest.mark.parametrize(("baseline", "stages"), [("baseline_moe_layer_e2e", MOE),
                                                  ("baseline_vision_pipeline_e2e", VISION)])
def test_every_stage_verifies_at_full_size(baseline: str, stages: list[str]) -> None:
    verify_stages_on_cuda(CH20, baseline, stages)


@pytest.mark.parametrize("module", MOE[1:])
def test_grouped_stage_never_waits_for_the_gpu(module: str) -> None:
    bench = built(module)
    bench.run()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        bench.run()
        if getattr(bench, "graph", None) is not None:
            bench.forward()  # the eager call the graph holds (Triton launches, device sort, _grouped_mm offsets)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()


@pytest.mark.parametrize("module", MOE[2:])
def test_fused_stage_replays_new_tokens(module: str) -> None:
    """The call captured in setup, replayed after new tokens are written into x in place, gives what the
    eager call gives for them."""
    bench = built(module)
    assert_replay_follows_new_tokens(bench, bench.workload)


def test_gather_combine_matches_the_bmm_combine_at_the_pair_shapes() -> None:
    """Stages 3 and 4's combine (aisp.kits.moe_combine.gather_combine) against ch20_moe.combine (16,384
    tokens, top-8, dim 2,048, bf16 rows): fp32 gates and sum against bf16 gates in the ``bmm``, a relative
    norm under 1e-2."""
    combine = import_module_at(CH20 / "ch20_moe.py").combine
    from aisp.kits.moe_combine import gather_combine as combine_gather

    gen = torch.Generator(device="cuda").manual_seed(0)
    order = torch.randperm(16384 * 8, generator=gen, device="cuda")
    gates = torch.softmax(torch.randn(16384, 8, generator=gen, device="cuda"), -1)
    y = torch.randn(16384 * 8, 2048, generator=gen, device="cuda").bfloat16()
    got, want = combine_gather(y, order, gates).float(), combine(y, order, gates).float()
    assert ((got - want).norm() / want.norm()).item() < 1e-2


def test_device_route_matches_the_baselines_routing_at_the_pair_shapes() -> None:
    """Stage 5's routing (aisp.kits.moe_topk_route) on the baseline's own bf16 router logits (16,384 tokens, 64
    experts, top-8): each token's 8 experts are the ones ``route``'s ``torch.topk`` picks on CUDA (equal logits
    at the 8th place decided alike: the tie rule), their gates ``route``'s; the order and schedule as stage 4's
    device_route sorts the same ids (stable: argsort's), and the order's inverse."""
    from aisp.kits.moe import route
    from aisp.kits.moe_gather import BM
    from aisp.kits.moe_schedule import device_route
    from aisp.kits.moe_topk_route import topk_route

    base = built("baseline_moe_layer_e2e")
    w = base.workload
    logits = base.x @ base.w_router
    top = logits.float().sort(dim=1, descending=True).values
    print("tokens with equal logits at the 8th/9th place:", int((top[:, w.top_k - 1] == top[:, w.top_k]).sum()))
    want_ids, want_gates = route(base.x, base.w_router, w.top_k)
    ids, gates, order, row, sched = topk_route(logits, w.top_k, BM)
    got_ids, i = ids.long().sort(dim=1)
    ref_ids, j = want_ids.sort(dim=1)
    assert torch.equal(got_ids, ref_ids), (got_ids != ref_ids).any(dim=1).sum().item()
    torch.testing.assert_close(gates.gather(1, i), want_gates.gather(1, j), rtol=1e-5, atol=1e-6)
    flat = ids.reshape(-1)
    order4, _, sched4 = device_route(flat, gates.reshape(-1), w.experts, BM, chunk=256)
    assert torch.equal(order, order4) and torch.equal(sched, sched4)
    assert torch.equal(order.long(), flat.long().argsort(stable=True))
    assert torch.equal(row[order.long()], torch.arange(flat.numel(), device="cuda", dtype=torch.int32))


def test_gpu_decode_matches_pil_pixels() -> None:
    base, gpu = built("optimized_vision_pipeline_e2e_s1_uint8_pinned"), built(VISION[1])
    with torch.no_grad():
        diff = (base.images() - gpu.images()).abs()
    print("max |normalized pixel difference|", float(diff.max()), "mean", float(diff.mean()))
    assert float(diff.mean()) < 0.05  # normalized units: ~2.5/255 of a pixel on average
