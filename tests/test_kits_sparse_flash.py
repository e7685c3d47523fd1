"""The block-sparse flash attention kit (aisp.kits.sparse_flash) without a GPU, and on one.

CPU: the tile lists (full tiles first, partial ones after, each really full or partial, the launch
order) at the two pairs' shapes, the same blocks FlexAttention's ``create_block_mask`` finds at 128 x
128, and a band that is not the rule refused; the kernel under TRITON_INTERPRET=1 against an fp64
reference on patterns with partial tiles, rows a tile masks whole, one tile a block, no tile at all,
plain causal and a short last head group (fp32: bf16 through tensor descriptors comes out garbled in
the Triton 3.6 interpreter, ch18's causal kernel alike); and its sm_90a code at both pairs' bands:
wgmma, TMA, at most 128 registers, no spills, no ptxas advisory, no serialized wgmma, and ch18
``_ahead``'s key-loop order (the K tile waited for after a softmax and a P V product). The same kernel
over host-made descriptors (``host=True``): the same bits as the device-made ones under the
interpreter, and its sm_90a code held to those checks (but 8 bytes of stack, outside the key loops),
with no descriptor written on the device.
The document mode: the starts and launch order from the flags, the tiles a block walks are exactly
those with a visible pair and the full ones exactly the all-visible ones, the kernel against an fp64
reference under the interpreter (documents longer than a tile, boundaries inside tiles and blocks,
one-token documents, rows with no flag; and launched in head groups, a group short), the grouped
order and program mapping (every entry and head once, in groups), and its sm_90a code held to the
band kernel's checks, in turn and in head groups.
GPU: bf16 at a pair-like shape (and empty blocks), and packed documents, against SDPA with the dense
mask in fp32."""

from __future__ import annotations

import re
import subprocess

import pytest
import torch
from ci_triton_scripts import assert_ran, run_scripts
from triton_cpu import (
    INTERPRETER_FIX,
    assert_tma_and_wgmma,
    compile_sm90,
    cuobjdump,
    fits_sm90,
    key_loop_events,
    ptxas_advisories,
    resource_usage,
    wgmma_serialized,
)

from aisp.kits.sparse_flash import BLOCK_M, BLOCK_N, LAUNCH, Band, document_layout, document_tiles, tile_lists

PAIR_BANDS = {"sliding_window_attention": Band(1024), "block_sparse_attention": Band(1024, 128)}
"""The two pairs' masks at 8,192 tokens (ch13: window 1,024; ch16: window 1,024 and 128 sink tokens)."""


def dense(band: Band, seq: int) -> torch.Tensor:
    pos = torch.arange(seq)
    return band.visible(pos[:, None], pos[None, :])


@pytest.mark.parametrize("band", PAIR_BANDS.values(), ids=PAIR_BANDS)
def test_lists_hold_each_blocks_full_tiles_then_its_partial_ones(band: Band) -> None:
    seq = 8192
    lists = tile_lists(band.visible, band, seq, "cpu")
    tiles = dense(band, seq).view(seq // BLOCK_M, BLOCK_M, seq // BLOCK_N, BLOCK_N)
    seen, full = tiles.any(3).any(1), tiles.all(3).all(1)
    offsets = lists.offsets.tolist()
    for b in range(seq // BLOCK_M):
        listed = lists.indices[offsets[b]:offsets[b + 1]].tolist()
        n_full = int(lists.full[b])
        assert listed[:n_full] == sorted(listed[:n_full]) and listed[n_full:] == sorted(listed[n_full:])
        assert all(full[b, t] for t in listed[:n_full]) and not any(full[b, t] for t in listed[n_full:])
        assert sorted(listed) == seen[b].nonzero().flatten().tolist()
    counts = torch.tensor(offsets).diff()
    assert sorted(lists.order.tolist()) == list(range(seq // BLOCK_M))
    assert counts[lists.order.long()].tolist() == sorted(counts.tolist(), reverse=True)
    assert lists.counts() == ((1080, 240) if band.sink == 0 else (1190, 238))


@pytest.mark.parametrize("band", PAIR_BANDS.values(), ids=PAIR_BANDS)
def test_lists_at_128_keys_are_flex_attentions_block_mask(band: Band) -> None:
    from torch.nn.attention.flex_attention import create_block_mask

    seq = 2048
    mask = create_block_mask(lambda b, h, q, kv: band.visible(q, kv), None, None, seq, seq, device="cpu")
    lists = tile_lists(band.visible, band, seq, "cpu", 128, 128)
    offsets = lists.offsets.tolist()
    for b in range(seq // 128):
        listed = lists.indices[offsets[b]:offsets[b + 1]].tolist()
        n_full, n_part = int(mask.full_kv_num_blocks[0, 0, b]), int(mask.kv_num_blocks[0, 0, b])
        assert int(lists.full[b]) == n_full
        assert sorted(listed[:n_full]) == sorted(mask.full_kv_indices[0, 0, b, :n_full].tolist())
        assert sorted(listed[n_full:]) == sorted(mask.kv_indices[0, 0, b, :n_part].tolist())


def test_lists_refuse_a_band_that_is_not_the_rule_and_tiles_that_do_not_divide() -> None:
    band = Band(48, 16)
    with pytest.raises(ValueError, match="is not the rule"):
        tile_lists(Band(48).visible, band, 256, "cpu", 32, 16)
    with pytest.raises(ValueError, match="do not divide"):
        tile_lists(band.visible, band, 200, "cpu", 32, 16)


INTERPRETED = """
import torch
import pytest
from aisp.kits import sparse_flash as sf
from aisp.kits.sparse_flash import Band, sparse_flash_attention, tile_lists
gen = torch.Generator().manual_seed(3)

def reference(q, k, v, mask):
    s = (q.double() @ k.double().transpose(-1, -2)) / q.shape[-1] ** 0.5
    return torch.softmax(s.masked_fill(~mask, float("-inf")), -1).nan_to_num(0.0) @ v.double()

# (band, seq, tiles, shape): a window whose left-edge tile comes first and is empty for some rows; window and
# sinks (sink tiles full, then partial); plain causal; one diagonal tile a block; no key at all (every block's
# list empty); a window of one key (two partial tiles a block, half of each empty); a short last head group
cases = [(Band(40), 128, (32, 16), (2, 3)), (Band(48, 16), 128, (32, 16), (1, 2)), (Band(1000), 128, (32, 32), (1, 2)),
         (Band(1), 96, (32, 32), (1, 2)), (Band(0), 64, (32, 16), (1, 2)), (Band(1), 64, (32, 16), (1, 2)),
         (Band(20, 5), 96, (32, 16), (3, 1))]
for band, seq, (bm, bn), (b, h) in cases:
    lists = tile_lists(band.visible, band, seq, "cpu", bm, bn)
    q, k, v = (torch.randn(b, h, seq, 32, generator=gen) for _ in range(3))
    pos = torch.arange(seq)
    ref = reference(q, k, v, band.visible(pos[:, None], pos[None, :]))
    if b * h == 3:
        sf.L2_SHARE = 2 * seq * 32 * 4 * 2  # two heads a group: the last group holds one
    out = sparse_flash_attention(q, k, v, lists)
    host = sparse_flash_attention(q, k, v, lists, host=True)  # descriptors made on the host: the same kernel body
    sf.L2_SHARE = 16 << 20
    err = (out.double() - ref).abs().max().item()
    assert err < 2e-5, (band, seq, bm, bn, err)
    assert torch.equal(host, out), (band, seq, bm, bn, (host - out).abs().max().item())
    if band.span == 0:
        assert int(lists.offsets[-1]) == 0 and ref.abs().max() == 0
wrong = tile_lists(Band(40).visible, Band(40), 128, "cpu", 32, 16)
q, k, v = (torch.randn(1, 1, 128, 32, generator=gen) for _ in range(3))
pos = torch.arange(128)
for host in (False, True):
    err = (sparse_flash_attention(q, k, v, wrong, host=host).double()
           - reference(q, k, v, Band(48).visible(pos[:, None], pos[None, :])))
    assert err.abs().max() > 1e-2, ("another band's answer passed", host)
with pytest.raises(ValueError, match="lists for seq 128"):
    sparse_flash_attention(*(torch.randn(1, 1, 64, 32) for _ in range(3)), wrong)
print("interpreted ok")
"""


def test_kernel_matches_fp64_under_the_interpreter(interpreted: dict) -> None:
    assert_ran(interpreted, "bands", "interpreted ok")


SIG = {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "o_ptr": "*bf16", "offsets": "*i32", "full": "*i32",
       "indices": "*i32", "order": "*i32", "n_heads": "i32", "seq": "i32", "qk_scale": "fp32"}


@pytest.mark.parametrize("band", PAIR_BANDS.values(), ids=PAIR_BANDS)
def test_sm90_kernel_keeps_aheads_loop_in_128_registers(band: Band) -> None:
    """At each pair's band and the kit's launch settings (two programs an SM): wgmma and TMA, no spills,
    at most 128 registers, no ptxas advisory (C7512 would serialize the wgmma), one wait a product, and
    in the key loop the softmax, the V wait, P V, the K wait, Q K^T, then the copies (ch18 ``_ahead``)."""
    consts = {"SPAN": band.span, "SINK": band.sink, "D": 128, "HEAD_GROUP": 4, "BLOCK_M": BLOCK_M,
              "BLOCK_N": BLOCK_N}
    compiled = compile_sm90("aisp/kits/sparse_flash:_sparse_flash_fwd", SIG, consts, LAUNCH, divisible=("seq",))
    assert_tma_and_wgmma(compiled, "K/V")
    assert fits_sm90(compiled)["REG"] <= 128
    assert 2 * compiled.metadata.shared <= 228 * 1024, compiled.metadata.shared
    assert ptxas_advisories(compiled) == []
    assert not wgmma_serialized(cuobjdump(compiled, "-sass"))
    assert key_loop_events(compiled.asm["ptx"]) == ["ex2", "wait", "mma", "wait", "mma", "tma"]


HOST_SIG = {"q_desc": "tensordesc<bf16[128, 128]>", "k_desc": "tensordesc<bf16[64, 128]>",
            "v_desc": "tensordesc<bf16[64, 128]>", "o_desc": "tensordesc<bf16[128, 128]>"} | {
    name: kind for name, kind in SIG.items() if not name.endswith("_ptr")}
"""``_sparse_flash_fwd_host``'s parameters at the kit's tiles, head_dim 128, bf16."""


@pytest.mark.parametrize("band", PAIR_BANDS.values(), ids=PAIR_BANDS)
def test_sm90_host_descriptor_kernel_keeps_the_loop_and_makes_no_descriptor(band: Band) -> None:
    """``_sparse_flash_fwd_host`` at each pair's band: the list kernel's checks but the spill one (two values,
    8 bytes, kept across the loops for O's store), no stack access inside a key loop, the key loops within
    5% of the list kernel's 342 and 509 SASS instructions a tile, and no descriptor written on the device
    (no tensormap.replace, no tensormap fence: the loads read the parameters)."""
    consts = {"SPAN": band.span, "SINK": band.sink, "HEAD_GROUP": 4, "BLOCK_M": BLOCK_M, "BLOCK_N": BLOCK_N}
    compiled = compile_sm90("aisp/kits/sparse_flash:_sparse_flash_fwd_host", HOST_SIG, consts, LAUNCH,
                            divisible=("seq",))
    assert_tma_and_wgmma(compiled, "Q/K/V")
    ptx = compiled.asm["ptx"]
    assert "tensormap.replace" not in ptx and "fence.proxy.tensormap" not in ptx
    usage = resource_usage(compiled)
    assert usage["REG"] <= 128 and usage["LOCAL"] == 0 and usage["STACK"] <= 8, usage
    assert 2 * compiled.metadata.shared <= 228 * 1024, compiled.metadata.shared
    assert ptxas_advisories(compiled) == []
    sass = cuobjdump(compiled, "-sass")
    assert not wgmma_serialized(sass)
    assert key_loop_events(ptx) == ["ex2", "wait", "mma", "wait", "mma", "tma"]
    loops = loop_ranges(sass)[:2]
    stack = [int(m.group(1), 16) for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\d\s+)?(?:STL|LDL)", sass)]
    assert not any(lo <= at <= hi for at in stack for lo, hi in loops), (stack, loops)
    unmasked, masked = ((hi - lo) // 16 + 1 for lo, hi in loops)
    assert unmasked <= 1.05 * 342 and masked <= 1.05 * 509, (unmasked, masked)


def flags(lengths: list[list[int]]) -> torch.Tensor:
    """(rows, seq) bool: True at each document's first token."""
    out = torch.zeros(len(lengths), sum(lengths[0]), dtype=torch.bool)
    for row, docs in enumerate(lengths):
        out[row, torch.tensor([0, *docs[:-1]]).cumsum(0)] = True
    return out


def document_mask(starts: torch.Tensor) -> torch.Tensor:
    """(rows, seq, seq) bool: query t sees keys starts[t] .. t."""
    pos = torch.arange(starts.shape[1])
    return (pos[None, None, :] >= starts[:, :, None]) & (pos[None, None, :] <= pos[None, :, None])


def random_packing(gen: torch.Generator, rows: int, seq: int, longest: int) -> list[list[int]]:
    out = []
    for _ in range(rows):
        docs: list[int] = []
        while sum(docs) < seq:
            docs.append(min(int(torch.randint(1, longest + 1, (1,), generator=gen)), seq - sum(docs)))
        out.append(docs)
    return out


def test_document_layout_gives_each_tokens_start_and_the_longest_blocks_first() -> None:
    f = flags([[3, 120, 5, 128], [256]])
    f[1, 0] = False  # a row whose first flag is missing: its first tokens start at 0 (cumsum's id 0)
    f[1, 70] = True
    starts, order = document_layout(f, 32)
    assert starts.dtype == torch.int32 and order.shape == (16,)
    expect = [[0] * 3 + [3] * 120 + [123] * 5 + [128] * 128, [0] * 70 + [70] * 186]
    assert starts.tolist() == expect
    ids = f.cumsum(-1)
    assert torch.equal(ids.gather(1, starts.long()), ids)  # a start is in its token's document
    since = (torch.arange(0, 256, 32) - starts[:, ::32]).flatten()
    assert sorted(order.tolist()) == list(range(16))
    assert since[order].tolist() == sorted(since.tolist(), reverse=True)


def test_grouped_layout_gives_each_row_its_blocks_longest_first_the_longest_row_first() -> None:
    f = flags([[3, 120, 5, 128], [256], [40, 200, 16], [100, 100, 56]])
    starts, order = document_layout(f, 32, grouped=True)
    assert torch.equal(starts, document_layout(f, 32)[0]) and order.dtype == torch.int64
    since = torch.arange(0, 256, 32) - starts[:, ::32]
    chunks = order.view(4, 8)
    rows = (chunks // 8).tolist()
    assert all(len(set(r)) == 1 for r in rows) and [r[0] for r in rows] == [1, 2, 0, 3]
    for r, chunk in zip(rows, chunks.tolist(), strict=True):
        assert sorted(chunk) == list(range(r[0] * 8, r[0] * 8 + 8))
        assert since[r[0], torch.tensor(chunk) % 8].tolist() == sorted(since[r[0]].tolist(), reverse=True)


def grouped_programs(rows: int, heads: int, n_blocks: int, group: int) -> list[tuple[int, int]]:
    """``_document_flash_fwd``'s mapping at HEAD_GROUP ``group``, in integers: per program id, its
    (position in ``order``, head)."""
    out = []
    for pid in range(rows * heads * n_blocks):
        chunk = pid // (heads * n_blocks)
        p = pid - chunk * (heads * n_blocks)
        first = p // (group * n_blocks) * group
        size = min(group, heads - first)
        r = p - first * n_blocks
        out.append((chunk * n_blocks + r // size, first + r % size))
    return out


@pytest.mark.parametrize(("rows", "heads", "n_blocks", "group"), [(4, 16, 64, 4), (3, 5, 7, 2), (2, 3, 4, 3), (1, 7, 5, 4),
                                                                  (2, 1, 3, 1), (4, 16, 64, 16), (2, 6, 4, 4)])
def test_grouped_mapping_runs_every_entry_and_head_once_a_groups_heads_fastest(rows: int, heads: int, n_blocks: int,
                                                                              group: int) -> None:
    programs = grouped_programs(rows, heads, n_blocks, group)
    assert sorted(programs) == [(e, h) for e in range(rows * n_blocks) for h in range(heads)]
    for chunk in range(rows):  # a chunk's programs: its entries only, head groups in turn, entries in order in each
        mine = programs[chunk * heads * n_blocks:(chunk + 1) * heads * n_blocks]
        assert all(e // n_blocks == chunk for e, _ in mine)
        for first in range(0, heads, group):
            size = min(group, heads - first)
            run = mine[first * n_blocks:(first + size) * n_blocks]
            assert run == [(chunk * n_blocks + j, first + h) for j in range(n_blocks) for h in range(size)]


@pytest.mark.parametrize(("bm", "bn"), [(BLOCK_M, BLOCK_N), (32, 8), (64, 64)])
def test_document_tiles_are_those_with_a_visible_pair_and_full_ones_all_visible(bm: int, bn: int) -> None:
    gen = torch.Generator().manual_seed(1)
    for lengths in ([[1024]], [[1] * 3 + [1021]], random_packing(gen, 3, 1024, 300), random_packing(gen, 2, 1024, 40)):
        starts, _ = document_layout(flags(lengths), bm)
        rows, seq = starts.shape
        tiles = document_mask(starts).view(rows, seq // bm, bm, seq // bn, bn)
        seen, full = tiles.any(4).any(2), tiles.all(4).all(2)
        first, full_from, diagonal = document_tiles(starts, bm, bn)
        k = torch.arange(seq // bn)
        walked = (k >= first[..., None]) & (k < diagonal[..., None] + bm // bn)
        unmasked = (k >= full_from[..., None]) & (k < diagonal[..., None])
        assert torch.equal(walked, seen) and torch.equal(unmasked, full), lengths


INTERPRETED_DOCUMENTS = """
import torch
import pytest
from aisp.kits import sparse_flash as sf
from aisp.kits.sparse_flash import document_flash_attention, document_layout
from test_kits_sparse_flash import document_mask, flags
gen = torch.Generator().manual_seed(5)

def reference(q, k, v, starts):
    s = (q.double() @ k.double().transpose(-1, -2)) / q.shape[-1] ** 0.5
    return torch.softmax(s.masked_fill(~document_mask(starts)[:, None], float("-inf")), -1) @ v.double()

# (rows' documents, tiles, heads): a document longer than a block and several tiles, boundaries inside a
# tile and inside a block (blocks whose tiles before them are all masked), one-token documents, a row of
# one document (plain causal), 8-key tiles, a block of one diagonal tile; a row with no flag at 0
cases = [([[40, 3, 50, 35], [128]], (32, 16), 2), ([[5, 1, 1, 60, 61], [96, 32]], (32, 8), 1),
         ([[7, 200, 49], [1, 255]], (64, 16), 2), ([[100, 28], [17, 111]], (16, 16), 1)]
for lengths, (bm, bn), h in cases:
    f = flags(lengths)
    if bm == 16:
        f[1, 0] = False
    b, seq = f.shape
    q, k, v = (torch.randn(b, h, seq, 32, generator=gen) for _ in range(3))
    starts, order = document_layout(f, bm)
    ref = reference(q, k, v, starts)
    err = (document_flash_attention(q, k, v, starts, order, bm, bn).double() - ref).abs().max().item()
    assert err < 2e-5, (lengths, bm, bn, err)
    backwards = order.flip(0).contiguous()  # any order of the entries gives the same answer
    assert (document_flash_attention(q, k, v, starts, backwards, bm, bn).double() - ref).abs().max() < 2e-5
# grouped launch: rows' chunks, heads in L2-sized groups (forced small: 2 heads a group of 3 or 5, the last short)
gen = torch.Generator().manual_seed(6)
for lengths, (bm, bn), h in [([[40, 3, 50, 35], [128], [1, 90, 37]], (32, 16), 3), ([[7, 200, 49], [1, 255]], (64, 16), 5),
                             ([[5, 1, 1, 60, 61], [96, 32]], (32, 8), 2)]:
    f = flags(lengths)
    b, seq = f.shape
    q, k, v = (torch.randn(b, h, seq, 32, generator=gen) for _ in range(3))
    starts, order = document_layout(f, bm, grouped=True)
    sf.L2_SHARE = 2 * seq * 32 * 4 * 2
    assert sf.document_head_group(q) == 2
    out = document_flash_attention(q, k, v, starts, order, bm, bn, grouped=True)
    sf.L2_SHARE = 16 << 20
    err = (out.double() - reference(q, k, v, starts)).abs().max().item()
    assert err < 2e-5, (lengths, bm, bn, h, err)
f = flags([[40, 3, 50, 35]])
q, k, v = (torch.randn(1, 1, 128, 32, generator=gen) for _ in range(3))
starts, order = document_layout(f, 32)
other, _ = document_layout(flags([[43, 50, 35]]), 32)
err = (document_flash_attention(q, k, v, other, order, 32, 16).double() - reference(q, k, v, starts)).abs().max()
assert err > 1e-2, "another packing's answer passed"
with pytest.raises(ValueError, match="int32"):
    document_flash_attention(q, k, v, starts.long(), order, 32, 16)
with pytest.raises(ValueError, match="do not divide"):
    document_flash_attention(q, k, v, starts, order[:2], 64, 48)
print("interpreted ok")
"""


def test_document_kernel_matches_fp64_under_the_interpreter(interpreted: dict) -> None:
    assert_ran(interpreted, "documents", "interpreted ok")


@pytest.fixture(scope="module")
def interpreted() -> dict[str, subprocess.CompletedProcess]:
    """Both interpreted scripts, each after INTERPRETER_FIX, in forks of one process that imported torch and
    triton once for the two (tests/ci_triton_scripts.py)."""
    pytest.importorskip("triton")
    scripts = {"bands": INTERPRETED, "documents": "import sys; sys.path.insert(0, 'tests')\n" + INTERPRETED_DOCUMENTS}
    return run_scripts({name: INTERPRETER_FIX + script for name, script in scripts.items()})


DOCUMENT_SIG = {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "o_ptr": "*bf16", "starts": "*i32",
                "order": "*i64", "n_heads": "i32", "heads": "i32", "seq": "i32", "qk_scale": "fp32"}


@pytest.mark.parametrize("group", [0, 4, 3])
def test_sm90_document_kernel_keeps_aheads_loop_in_128_registers(group: int) -> None:
    """The document mode at the kit's tiles and launch settings, in turn and in head groups (the pair's 4,
    and 3: not a power of two): the band kernel's checks, and its two loops (unmasked, masked) within 5%
    of ``_ahead``'s 325 and 474 SASS instructions a tile."""
    consts = {"D": 128, "BLOCK_M": BLOCK_M, "BLOCK_N": BLOCK_N, "HEAD_GROUP": group}
    compiled = compile_sm90("aisp/kits/sparse_flash:_document_flash_fwd", DOCUMENT_SIG, consts, LAUNCH,
                            divisible=("seq", "heads", "n_heads"))
    assert_aheads_tile_loops(compiled)


def assert_aheads_tile_loops(compiled) -> None:
    """The list kernel's sm_90a checks (wgmma and TMA, at most 128 registers, no spills, two programs an SM,
    no ptxas advisory, no serialized wgmma, ``_ahead``'s key-loop order), and the kernel's first two loops
    (unmasked, masked) within 5% of ``_ahead``'s 325 and 474 SASS instructions a tile."""
    assert_tma_and_wgmma(compiled, "K/V")
    assert fits_sm90(compiled)["REG"] <= 128
    assert 2 * compiled.metadata.shared <= 228 * 1024, compiled.metadata.shared
    assert ptxas_advisories(compiled) == []
    sass = cuobjdump(compiled, "-sass")
    assert not wgmma_serialized(sass)
    assert key_loop_events(compiled.asm["ptx"]) == ["ex2", "wait", "mma", "wait", "mma", "tma"]
    unmasked, masked = loop_bodies(sass)[:2]
    assert unmasked <= 1.05 * 325 and masked <= 1.05 * 474, (unmasked, masked)


def loop_bodies(sass: str) -> list[int]:
    """SASS instructions of each backward branch's body (target to branch), in code order: the key
    loops first (then the barrier waits' retry stubs, which jump back into the code)."""
    return [(at - to) // 16 + 1 for to, at in loop_ranges(sass)]


def loop_ranges(sass: str) -> list[tuple[int, int]]:
    """(target, branch) addresses of each backward branch in the SASS, in code order (``loop_bodies``'s)."""
    out = []
    for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?P\d\s+)?BRA\s+0x([0-9a-f]+)", sass):
        at, to = int(m.group(1), 16), int(m.group(2), 16)
        if to < at:
            out.append((to, at))
    return out


@pytest.mark.gpu
def test_document_kernel_matches_masked_sdpa_on_a_gpu() -> None:
    """bf16, 3 packed rows of 4,096 tokens (documents of 1 to 1,500 tokens), 4 heads of 128, at the kit's
    tiles, launched in turn and in head groups, against SDPA on the dense document mask in fp32."""
    import torch.nn.functional as F

    from aisp.kits.sparse_flash import document_flash_attention

    gen = torch.Generator().manual_seed(2)
    f = flags(random_packing(gen, 3, 4096, 1500)).cuda()
    cuda = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(3, 4, 4096, 128, generator=cuda, device="cuda").bfloat16() for _ in range(3))
    starts = document_layout(f)[0]
    mask = document_mask(starts.cpu()).cuda()[:, None]
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask)
    for grouped in (False, True):  # in turn, and in head groups (2 MB of K/V a head: all 4 heads one group)
        out = document_flash_attention(q, k, v, starts, document_layout(f, grouped=grouped)[1], grouped=grouped)
        torch.testing.assert_close(out.float(), ref, atol=2e-2, rtol=2e-2)


@pytest.mark.gpu
def test_kernel_matches_masked_sdpa_on_a_gpu() -> None:
    """bf16, 2 x 4 heads of 4,096 tokens, head dim 128, at the kit's tiles: both pairs' bands, and a band
    with no key (every list empty: zeros), against SDPA on the dense mask in fp32; the kernel over
    device-made descriptors and over host-made ones (``host=True``)."""
    import torch.nn.functional as F

    from aisp.kits.sparse_flash import sparse_flash_attention

    gen = torch.Generator(device="cuda").manual_seed(0)
    seq = 4096
    q, k, v = (torch.randn(2, 4, seq, 128, generator=gen, device="cuda").bfloat16() for _ in range(3))
    for band in (*PAIR_BANDS.values(), Band(0)):
        mask = dense(band, seq).cuda()
        lists = tile_lists(band.visible, band, seq, "cuda")
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask).nan_to_num(0.0)
        for host in (False, True):  # descriptors made by each program, or on the host
            out = sparse_flash_attention(q, k, v, lists, host=host)
            torch.testing.assert_close(out.float(), ref, atol=2e-2, rtol=2e-2)
