"""Chapter 18's PyTorch pairs (flex_document_mask, gqa_no_repeat, mla_absorption, cudagraph_bucketing,
flexdecoding) on a CPU at small sizes, same code: every variant gives its baseline's output on two
seeds and on refilled inputs, another seed's answer is rejected, every file documents itself, the
GPU-sized pairs skip on a CPU with the reason; and each optimization does what it claims: block
masks list exactly the tiles with a visible pair (the decode one, built from positions, through the
compiled kernel too; the document one, built from document ids, equal to create_block_mask's on
edge cases, and compiling nothing but the kernel, once), weight absorption stays within bf16 tolerance in bf16, the bucketed engine
captures its buckets only while the lazy one captures each size it meets.
The Triton pairs of the chapter, and mla_absorption's and flex_document_mask's Triton variants (here:
skipped with the reason on a CPU without the interpreter; the document kernel's tiles at the pair's
size counted for its estimate), are tested in test_ch18_triton.py."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch
from conftest import variant_modules
from refill_check import check_refilled_pair, check_two_seeds

import aisp
from aisp.harness.benchmark import unmet_requirements
from aisp.harness.loader import import_module_at
from aisp.harness.verify import compare
from aisp.kits.llm import LLMConfig

CH18 = Path(__file__).resolve().parents[1] / "ch18"
TINY = LLMConfig(vocab=256, dim=64, layers=2, heads=4, kv_heads=2, ffn=128)
SMALL = {
    "flex_document_mask": dict(batch=2, seq=512, heads=2, head_dim=32, median_doc=64, longest=256),
    "gqa_no_repeat": dict(batch=2, heads=8, kv_heads=2, context=300, head_dim=32),
    "mla_absorption": dict(batch=3, context=200, dim=128, heads=4, latent=64, nope=32, rope=16, v_dim=32),
    "cudagraph_bucketing": dict(model=TINY, max_batch=8, prompt=8, steps=14),
    "flexdecoding": dict(batch=3, heads=4, kv_heads=2, head_dim=32, cache_len=1024, span=300),
}
"""Per pair, workload sizes that keep a CPU run under a second."""
PAIRS = tuple(SMALL)
pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")


def load(module: str) -> ModuleType:
    return import_module_at(CH18 / f"{module}.py")


def pair_of(module: str) -> str:
    name = module.split("_", 1)[1]
    for variant in ("_fold", "_graph", "_fused_qo", "_fused", "_split", "_autotuned", "_wgmma", "_grouped", "_triton"):
        name = name.removesuffix(variant)
    return name


def build(module: str, seed: int) -> aisp.Benchmark:
    bench = load(module).get_benchmark()
    bench.device, bench.seed = torch.device("cpu"), seed
    bench.workload = dataclasses.replace(bench.workload, **SMALL[pair_of(module)])
    return bench


TRITON_VARIANTS = ("optimized_mla_absorption_fused", "optimized_mla_absorption_fused_qo",
                   "optimized_mla_absorption_graph", "optimized_mla_absorption_wgmma", "optimized_flex_document_mask_triton",
                   "optimized_flex_document_mask_triton_grouped")
"""Variants that launch a Triton kernel: verified under the interpreter in test_ch18_triton.py."""


def my_variants() -> list[tuple[str, str]]:
    return [(b, o) for b, o in variant_modules(CH18) if b.removeprefix("baseline_") in PAIRS and o not in TRITON_VARIANTS]


def test_the_harness_discovers_every_pair_and_variant() -> None:
    found = set(variant_modules(CH18))
    expected = {(f"baseline_{p}", f"optimized_{p}") for p in PAIRS}
    expected |= {("baseline_gqa_no_repeat", "optimized_gqa_no_repeat_fold"), ("baseline_flexdecoding", "optimized_flexdecoding_graph"),
                 ("baseline_flexdecoding", "optimized_flexdecoding_split"), ("baseline_flexdecoding", "optimized_flexdecoding_fused"),
                 ("baseline_flex_document_mask", "optimized_flex_document_mask_autotuned")}
    assert expected <= found
    assert len(my_variants()) == len(expected)
    assert {(f"baseline_{pair_of(o)}", o) for o in TRITON_VARIANTS} <= found


@pytest.mark.parametrize("module", TRITON_VARIANTS)
def test_triton_variant_skips_on_a_cpu_without_the_interpreter(module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(aisp.Unavailable, match="CUDA GPU"):
        build(module, 0).setup()


@pytest.mark.parametrize(("baseline", "optimized"), my_variants())
def test_pair_matches_on_two_seeds_and_rejects_a_wrong_answer(baseline: str, optimized: str) -> None:
    check_two_seeds(build, baseline, optimized)


@pytest.mark.parametrize(("baseline", "optimized"), my_variants())
def test_pair_matches_on_refilled_inputs(baseline: str, optimized: str) -> None:
    check_refilled_pair(build(baseline, 0), build(optimized, 0), build(baseline, 0).workload)


@pytest.mark.parametrize(("baseline", "optimized"), my_variants())
def test_gpu_sized_pairs_skip_on_a_cpu_with_the_reason(baseline: str, optimized: str) -> None:
    base, opt = load(baseline).get_benchmark(), load(optimized).get_benchmark()
    assert base.inputs == opt.inputs and base.inputs and isinstance(opt, type(base))
    reason = unmet_requirements(base.workload.requires, torch.device("cpu"))
    assert reason and "CUDA" in reason
    assert base.workload.items > 0 and base.workload.flops > 0


@pytest.mark.parametrize("path", sorted(p for p in CH18.glob("*_*.py") if pair_of(p.stem) in PAIRS or p.stem
                                        in ("ch18_flex", "ch18_graphs")), ids=lambda p: p.stem)
def test_file_documents_itself(path: Path) -> None:
    assert len(path.read_text().splitlines()) < 150
    if not path.stem.startswith(("baseline_", "optimized_")):
        return
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    for line in ("Baseline", "Optimized", "Expect", "Run:", f"ch18:{pair_of(path.stem)}"):
        assert line in doc, f"{path.name} docstring lacks '{line}'"
    assert "not yet measured" in doc or "measured, H200" in doc, f"{path.name}: Expect is neither measured nor marked"
    if path.stem.startswith("baseline_"):
        assert "Tolerance:" in doc


def flex() -> ModuleType:
    sys.path.insert(0, str(CH18))
    import ch18_flex
    return ch18_flex


@pytest.mark.parametrize("window", [1, 128, 300, 1024])
def test_window_block_mask_lists_the_tiles_create_block_mask_finds(window: int) -> None:
    from torch.nn.attention.flex_attention import create_block_mask
    f, kv_len = flex(), 2048
    pos = torch.tensor([0, 5, 127, 128, 299, 300, 1000, 1791, 2047])
    mask_mod = f.sliding_window_mask(pos, window)
    mine = f.window_block_mask(pos, window, kv_len, mask_mod)
    ref = create_block_mask(mask_mod, len(pos), None, 1, kv_len, device="cpu")
    assert torch.equal(mine.to_dense().bool(), ref.to_dense().bool())


def test_window_block_mask_lists_consecutive_blocks_as_blocks_are_contiguous_requires() -> None:
    """kernel_sweep.py tries the flex kernel option BLOCKS_ARE_CONTIGUOUS (the kernel then steps to the
    next key tile without loading its index): it holds for the decode mask at every position, at the
    window's start of the cache and at its end; a shuffled list is rejected (the check can fail)."""
    from flex_autotune import blocks_are_contiguous
    f, kv_len, window = flex(), 4096, 1000
    pos = torch.tensor([0, 1, 127, 128, 999, 1000, 2047, 3000, 4095])
    mask = f.window_block_mask(pos, window, kv_len, f.sliding_window_mask(pos, window))
    assert blocks_are_contiguous(mask)
    mask.kv_indices[-1, 0, 0, :3] = mask.kv_indices[-1, 0, 0, :3].flip(0)
    assert not blocks_are_contiguous(mask)


def test_compiled_flex_decoding_honors_the_window_block_mask() -> None:
    from torch.nn.attention.flex_attention import flex_attention
    f, gen = flex(), torch.Generator().manual_seed(0)
    pos, window, kv_len = torch.tensor([3, 200, 700, 1023]), 300, 1024
    q, k, v = (torch.randn(4, h, n, 32, generator=gen) for h, n in ((4, 1), (2, kv_len), (2, kv_len)))
    mask_mod = f.sliding_window_mask(pos, window)
    block_mask = f.window_block_mask(pos, window, kv_len, mask_mod)
    compiled = torch.compile(flex_attention, dynamic=False)
    keys = [slice(max(0, int(p) - window + 1), int(p) + 1) for p in pos]
    ref = torch.cat([torch.nn.functional.scaled_dot_product_attention(q[i:i + 1], k[i:i + 1, :, s], v[i:i + 1, :, s],
                                                                      enable_gqa=True) for i, s in enumerate(keys)])
    torch.testing.assert_close(compiled(q, k, v, block_mask=block_mask, enable_gqa=True), ref)
    block_mask.kv_num_blocks.fill_(1)  # drop blocks: the compiled kernel must skip them
    assert not torch.allclose(compiled(q, k, v, block_mask=block_mask, enable_gqa=True), ref, atol=1e-3)


def test_compiled_window_decode_is_one_graph_that_reads_new_positions() -> None:
    """flexdecoding's _fused step compiled as on the GPU (here Inductor's CPU code): each row's window
    as SDPA over its slice; new positions change the answer without a recompile (the mask and the
    BlockMask are built inside the graph from ``pos`` at every call); fullgraph: no graph break."""
    from torch._dynamo.utils import counters
    f, gen = flex(), torch.Generator().manual_seed(0)
    window, kv_len = 300, 1024
    q, k, v = (torch.randn(4, h, n, 32, generator=gen) for h, n in ((4, 1), (2, kv_len), (2, kv_len)))
    torch._dynamo.reset()
    counters.clear()
    for positions in ([3, 200, 700, 1023], [1023, 0, 299, 512]):
        pos = torch.tensor(positions)
        keys = [slice(max(0, p - window + 1), p + 1) for p in positions]
        ref = torch.cat([torch.nn.functional.scaled_dot_product_attention(q[i:i + 1], k[i:i + 1, :, s], v[i:i + 1, :, s],
                                                                          enable_gqa=True) for i, s in enumerate(keys)])
        torch.testing.assert_close(f._WINDOW_DECODE(q, k, v, pos, window), ref)
        assert not torch.allclose(f._WINDOW_DECODE(q, k, v, pos.roll(1), window), ref, atol=1e-3)
    assert counters["stats"]["unique_graphs"] == 1


def test_fused_flexdecoding_takes_8_splits_only_where_the_template_sizes_them_from_the_mask(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """This PyTorch's flex-decoding template sizes a split from the row's listed blocks, so _fused
    asks for 8 (9 tiles of 64 keys each for a 33-block window); a template that sized splits from
    the cache length would leave 2 of 8 busy, and the variant keeps _split's 32 there."""
    import torch._inductor.kernel.flex.common as common
    f = flex()
    assert f.splits_follow_the_mask() and load("optimized_flexdecoding_fused").SPLIT_KV == 8
    text = common.load_flex_template("flex_decode")
    monkeypatch.setattr(common, "load_flex_template", lambda name: text.replace("kv_num_blocks * SPARSE_KV_BLOCK_SIZE", "KV_LEN"))
    assert not f.splits_follow_the_mask()
    module = importlib.reload(load("optimized_flexdecoding_fused"))
    assert module.SPLIT_KV == load("optimized_flexdecoding_split").SPLIT_KV == 32
    monkeypatch.undo()
    assert importlib.reload(module).SPLIT_KV == 8


def test_document_block_mask_keeps_only_tiles_with_a_visible_pair() -> None:
    from torch.nn.attention.flex_attention import create_block_mask
    f, full = flex(), load("baseline_flex_document_mask").WORKLOAD
    assert full.flops == 4.0 * full.heads * full.head_dim * full.visible_pairs()
    assert 0.05 < full.visible_pairs() / (full.batch * full.seq ** 2) < 0.08
    w = dataclasses.replace(full, batch=2, seq=2048, median_doc=128, longest=1024)
    doc = f.document_starts(w.documents(), torch.device("cpu")).cumsum(-1)
    tiles = create_block_mask(f.causal_document_mask(doc), w.batch, None, w.seq, w.seq, device="cpu").to_dense()
    n = w.seq // f.BLOCK
    for row, lengths in enumerate(w.documents()):  # a tile is kept iff one document spans its rows and columns
        ends = torch.tensor(lengths).cumsum(0)
        want = torch.zeros(n, n, dtype=torch.bool)
        for s, e in zip((ends - torch.tensor(lengths)).tolist(), ends.tolist(), strict=True):
            want[s // f.BLOCK:(e - 1) // f.BLOCK + 1, s // f.BLOCK:(e - 1) // f.BLOCK + 1] = True
        assert torch.equal(tiles[row, 0].bool(), want.tril())


DOCUMENTS = {  # per row, its documents' lengths (each row 1,024 tokens, 8 tiles)
    "on_tile_edges": [[128, 256, 640], [1024]],
    "off_tile_edges": [[100, 300, 1, 623], [129, 127, 768]],
    "shorter_than_a_tile": [[5, 7, 116, 3, 125, 768], [1] * 10 + [1014]],
    "one_per_token_then_long": [[1] * 130 + [894], [512, 512]],
}


def block_mask_lists(mask: object) -> dict[str, list[list[int]]]:
    """Per query tile, the sorted partial and full key-tile lists of a BlockMask (order within a list
    is not part of the contract)."""
    out = {}
    for kind in ("kv", "full_kv"):
        counts, indices = getattr(mask, f"{kind}_num_blocks"), getattr(mask, f"{kind}_indices")
        out[kind] = [sorted(indices[b, 0, i, :n].tolist()) for b in range(counts.shape[0])
                     for i, n in enumerate(counts[b, 0].tolist())]
    return out


@pytest.mark.parametrize("lengths", DOCUMENTS.values(), ids=DOCUMENTS.keys())
def test_document_block_mask_equals_what_create_block_mask_builds(lengths: list[list[int]]) -> None:
    from torch.nn.attention.flex_attention import create_block_mask
    f = flex()
    doc = f.document_starts(lengths, torch.device("cpu")).cumsum(-1)
    mask_mod = f.causal_document_mask(doc)
    mine, ref = f.document_block_mask(doc, mask_mod), create_block_mask(mask_mod, 2, None, 1024, 1024, device="cpu")
    assert block_mask_lists(mine) == block_mask_lists(ref)
    for name in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices"):  # even the order
        assert torch.equal(getattr(mine, name), getattr(ref, name)), name
    assert mine.mask_mod is mask_mod and mine.seq_lengths == (1024, 1024) and mine.BLOCK_SIZE == (f.BLOCK, f.BLOCK)
    assert mine.full_kv_num_blocks.sum() > 0 or lengths == DOCUMENTS["shorter_than_a_tile"]


def test_document_block_mask_takes_any_non_decreasing_ids() -> None:
    """The harness refills ``starts`` with random flags: the ids stay non-decreasing, the mask exact."""
    from torch.nn.attention.flex_attention import create_block_mask
    f, gen = flex(), torch.Generator().manual_seed(1)
    for density in (0.0, 0.002, 0.01, 0.5):
        doc = (torch.rand(3, 2048, generator=gen) < density).cumsum(-1)
        mask_mod = f.causal_document_mask(doc)
        ref = create_block_mask(mask_mod, 3, None, 2048, 2048, device="cpu")
        assert block_mask_lists(f.document_block_mask(doc, mask_mod)) == block_mask_lists(ref)
    with pytest.raises(ValueError, match="multiple"):
        f.document_block_mask(torch.zeros(1, 200, dtype=torch.long), mask_mod)


def test_optimized_document_mask_compiles_only_the_kernel_and_only_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the GPU's compiled flex_attention (here on a CPU): one graph for the kernel, none for the
    mask, and no recompile for a second setup (a new mask_mod closure) or refilled document starts."""
    from torch._dynamo.utils import counters
    f, module = flex(), load("optimized_flex_document_mask")
    monkeypatch.setattr(module, "flex_on", lambda device: f._FLEX)
    torch._dynamo.reset()
    counters.clear()
    for seed in (0, 1):
        bench = build("optimized_flex_document_mask", seed)
        bench.setup()
        bench.starts.copy_(torch.rand(bench.starts.shape) < 0.02)
        bench.run()
    assert counters["stats"]["unique_graphs"] == 1  # a recompile would add a graph
    assert "create_block_mask" not in vars(f)


def test_mla_absorption_stays_within_bf16_tolerance_in_bf16() -> None:
    outs = []
    for module in ("baseline_mla_absorption", "optimized_mla_absorption"):
        bench = build(module, 0)
        bench.workload = dataclasses.replace(bench.workload, batch=4, context=512, dim=512, heads=8, latent=256, nope=64,
                                             rope=32, v_dim=64)
        bench.setup()
        for name in ("x", "cache", "w_q", "w_ukv", "w_o", "cos", "sin"):
            setattr(bench, name, getattr(bench, name).bfloat16())
        bench.prepare()
        outs.append([("out", bench.run())])
    compare(outs[0], outs[1], dataclasses.replace(bench.workload, precision="bf16"))


def test_lazy_engine_captures_each_size_and_bucketed_engine_only_buckets() -> None:
    captured = {}
    for module in ("baseline_cudagraph_bucketing", "optimized_cudagraph_bucketing"):
        bench = build(module, 0)
        bench.setup()
        bench.run()
        captured[module] = sorted(bench.graphs)
    sizes = build("baseline_cudagraph_bucketing", 0).workload.sizes()
    assert captured["baseline_cudagraph_bucketing"] == sorted(set(sizes))
    assert captured["optimized_cudagraph_bucketing"] == [1, 2, 4, 8]
    full = {side: load(f"{side}_cudagraph_bucketing").get_benchmark() for side in ("baseline", "optimized")}
    for bench in full.values():
        bench.sizes = bench.workload.sizes()
    assert full["baseline"].metrics() == {"captures": 21.0, "padding": 0.0}
    assert full["optimized"].metrics()["captures"] == 6.0 and 0.05 < full["optimized"].metrics()["padding"] < 0.15


def test_padding_rows_sit_on_the_trash_slot_that_no_live_query_sees() -> None:
    w = dataclasses.replace(load("baseline_cudagraph_bucketing").WORKLOAD, **SMALL["cudagraph_bucketing"])
    pos = w.positions()
    for t, size in enumerate(w.sizes()):
        assert (pos[t, size:] == w.kv_len() - 1).all() and (pos[t, :size] < w.kv_len() - 1).all()


def test_autotuned_document_variant_computes_as_its_parent_on_a_cpu() -> None:
    from flex_autotune import outputs

    parent, autotuned = outputs(build, "optimized_flex_document_mask", "optimized_flex_document_mask_autotuned")
    assert torch.equal(parent, autotuned)


def test_autotuned_document_variant_compiles_with_max_autotune_on_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a GPU: the device is only read. On a CPU eager flex_attention, as the parent; no
    kernel_options, the document mask having neither property (an edge tile visited first is empty
    for the next document's rows; partial tiles apart)."""
    from flex_autotune import AUTOTUNE, CompileRecorder, blocks_are_contiguous, rows_guaranteed_safe
    from torch.nn.attention.flex_attention import flex_attention

    recorder = CompileRecorder()
    monkeypatch.setattr(torch, "compile", recorder)
    bench = load("optimized_flex_document_mask_autotuned").get_benchmark()
    bench.device = torch.device("cuda")
    assert bench.flex() is flex_attention and recorder.calls == [AUTOTUNE]
    bench.device = torch.device("cpu")
    assert bench.flex() is flex_attention and len(recorder.calls) == 1
    f = flex()
    w = dataclasses.replace(load("baseline_flex_document_mask").WORKLOAD, batch=2, seq=2048, median_doc=128, longest=1024)
    doc = f.document_starts(w.documents(), torch.device("cpu")).cumsum(-1)
    mask = f.document_block_mask(doc, f.causal_document_mask(doc))
    assert not rows_guaranteed_safe(mask) and not blocks_are_contiguous(mask)


def test_document_kernel_walks_the_tiles_its_estimate_counts() -> None:
    """The Triton variant's estimate: at the pair's size its kernel walks 2,576 tiles of 128 x 64 a head
    across the 4 rows, 1,097 masked, 27% more pairs than the visible ones (aisp.kits.sparse_flash)."""
    from aisp.kits.sparse_flash import BLOCK_M, BLOCK_N, document_layout, document_tiles

    f, w = flex(), load("baseline_flex_document_mask").WORKLOAD
    first, full_from, diagonal = document_tiles(document_layout(f.document_starts(w.documents(), torch.device("cpu")))[0])
    tiles = int((diagonal + BLOCK_M // BLOCK_N - first).sum())
    assert (tiles, tiles - int((diagonal - full_from).sum())) == (2576, 1097)
    assert round(tiles * BLOCK_M * BLOCK_N / w.visible_pairs(), 2) == 1.27
