"""Chapter 18's PyTorch pairs on a GPU: every variant verifies against its baseline at the H200 size,
twice (graph replays, recompiled masks) and on refilled inputs (the graphed flex step reads new
positions at its fixed addresses); the flex-decoding kernel honors the per-row window block mask
(against SDPA over each row's window slice, and a dropped block changes the answer); the document
BlockMask built from the ids lists the tiles create_block_mask lists at the pair's size; the flash
kernel takes GQA without a repeat at the gqa_no_repeat shape; the engines capture what the
cudagraph_bucketing headers say. Timing is the harness's (aisp bench run -t ch18)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch
import torch.nn.functional as F
from refill_check import check_refilled_pair

import aisp
from aisp.harness.execute import guarded_run
from aisp.harness.loader import import_module_at
from aisp.harness.verify import compare

CH18 = Path(__file__).resolve().parents[1] / "ch18"
VARIANTS = [("flex_document_mask", "optimized_flex_document_mask"),
            ("flex_document_mask", "optimized_flex_document_mask_autotuned"), ("gqa_no_repeat", "optimized_gqa_no_repeat"),
            ("gqa_no_repeat", "optimized_gqa_no_repeat_fold"), ("mla_absorption", "optimized_mla_absorption"),
            ("cudagraph_bucketing", "optimized_cudagraph_bucketing"), ("flexdecoding", "optimized_flexdecoding"),
            ("flexdecoding", "optimized_flexdecoding_graph"), ("flexdecoding", "optimized_flexdecoding_fused")]
pytestmark = pytest.mark.gpu


def load(module: str) -> ModuleType:
    return import_module_at(CH18 / f"{module}.py")


def cuda_bench(module: str) -> aisp.Benchmark:
    bench = load(module).get_benchmark()
    bench.device = torch.device("cuda")
    return bench


def cuda_bench_setup(module: str) -> aisp.Benchmark:
    bench = cuda_bench(module)
    bench.setup()
    return bench


@pytest.mark.parametrize(("name", "optimized"), VARIANTS, ids=[o for _, o in VARIANTS])
def test_variant_verifies_at_full_size_twice(name: str, optimized: str) -> None:
    workload, outs = load(f"baseline_{name}").WORKLOAD, []
    for module in (f"baseline_{name}", optimized):
        bench = cuda_bench(module)
        bench.setup()
        outs += [guarded_run(bench), guarded_run(bench)]
        bench.teardown()
        torch.cuda.empty_cache()
    compare(outs[0], outs[2], workload)
    compare(outs[0], outs[1], workload)
    compare(outs[2], outs[3], workload)


@pytest.mark.parametrize(("name", "optimized"), VARIANTS, ids=[o for _, o in VARIANTS])
def test_variant_matches_on_refilled_inputs(name: str, optimized: str) -> None:
    check_refilled_pair(cuda_bench(f"baseline_{name}"), cuda_bench(optimized), load(f"baseline_{name}").WORKLOAD)
    torch.cuda.empty_cache()


def test_flex_decoding_kernel_honors_the_window_block_mask() -> None:
    sys.path.insert(0, str(CH18))
    from ch18_flex import flex_on, sliding_window_mask, window_block_mask

    gen = torch.Generator(device="cuda").manual_seed(0)
    pos, window, kv_len = torch.tensor([0, 130, 4095, 9000, 16383], device="cuda"), 4096, 16384
    q, k, v = (torch.randn(5, h, n, 128, generator=gen, device="cuda").bfloat16() for h, n in ((32, 1), (8, kv_len), (8, kv_len)))
    mask_mod = sliding_window_mask(pos, window)
    block_mask = window_block_mask(pos, window, kv_len, mask_mod)
    attend = flex_on(torch.device("cuda"))
    out = attend(q, k, v, block_mask=block_mask, enable_gqa=True)
    for i, p in enumerate(pos.tolist()):
        keys = slice(max(0, p - window + 1), p + 1)
        ref = F.scaled_dot_product_attention(q[i:i + 1], k[i:i + 1, :, keys], v[i:i + 1, :, keys], enable_gqa=True)
        torch.testing.assert_close(out[i:i + 1], ref, rtol=2e-2, atol=2e-3)
    block_mask.kv_num_blocks.clamp_(max=1)
    assert not torch.allclose(attend(q, k, v, block_mask=block_mask, enable_gqa=True), out, atol=1e-2)


def device_work(step) -> list[str]:
    """Names of the kernels (and copies) one call of ``step`` runs on the GPU, after a warm-up call."""
    step()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def test_compiled_window_step_reads_new_positions_and_runs_fewer_kernels() -> None:
    """flexdecoding's _fused step (mask, BlockMask and flex_attention in one compiled graph) at the
    pair's size: each row's window as SDPA over its slice, new positions read without a recompile,
    and fewer kernels a call than the _split step it replaces (both lists printed; run with -s)."""
    from torch._dynamo.utils import counters
    fused, split = cuda_bench_setup("optimized_flexdecoding_fused"), cuda_bench_setup("optimized_flexdecoding_split")
    graphs = counters["stats"]["unique_graphs"]
    for pos in (fused.pos.clone(), fused.pos.flip(0)):
        fused.pos.copy_(pos)
        out = fused.step()
        for i, p in enumerate(pos.tolist()[:4]):
            keys = slice(max(0, p - fused.workload.span + 1), p + 1)
            ref = F.scaled_dot_product_attention(fused.q[i:i + 1], fused.k[i:i + 1, :, keys], fused.v[i:i + 1, :, keys],
                                                 enable_gqa=True)
            torch.testing.assert_close(out[i:i + 1], ref, rtol=2e-2, atol=2e-3)
    assert counters["stats"]["unique_graphs"] == graphs, "new positions recompiled the step"
    mine, theirs = device_work(fused.step), device_work(split.step)
    print(f"_fused ({fused.kernel_options}): {len(mine)} {mine}\n_split: {len(theirs)} {theirs}")
    assert len(mine) <= len(theirs) - 8


def test_document_block_mask_matches_create_block_mask_at_the_pair_size() -> None:
    sys.path.insert(0, str(CH18))
    from ch18_flex import causal_document_mask, document_block_mask, document_starts
    from torch.nn.attention.flex_attention import create_block_mask

    w = load("baseline_flex_document_mask").WORKLOAD
    doc = document_starts(w.documents(), torch.device("cuda")).cumsum(-1)
    mask_mod = causal_document_mask(doc)
    mine, ref = document_block_mask(doc, mask_mod), create_block_mask(mask_mod, w.batch, None, w.seq, w.seq, device="cuda")
    for name in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices"):
        assert torch.equal(getattr(mine, name), getattr(ref, name)), name


def test_flash_takes_gqa_without_a_repeat_at_the_pair_shape() -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    base, opt = cuda_bench_setup("baseline_gqa_no_repeat"), cuda_bench_setup("optimized_gqa_no_repeat")
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):  # raises if flash cannot take enable_gqa here
        compare(guarded_run(base), guarded_run(opt), base.workload)


def test_engines_capture_what_the_headers_say() -> None:
    for side, captures in (("baseline", 21), ("optimized", 6)):
        bench = cuda_bench_setup(f"{side}_cudagraph_bucketing")
        bench.run()
        assert len(bench.graphs) == captures == bench.metrics()["captures"]
        assert all(g.graph is not None for g in bench.graphs.values())
