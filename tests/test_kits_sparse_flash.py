"""The block-sparse flash attention kit (aisp.kits.sparse_flash) without a GPU, and on one.

CPU: the tile lists (full tiles first, partial ones after, each really full or partial, the launch
order) at the two pairs' shapes, the same blocks FlexAttention's ``create_block_mask`` finds at 128 x
128, and a band that is not the rule refused; the kernel under TRITON_INTERPRET=1 against an fp64
reference on patterns with partial tiles, rows a tile masks whole, one tile a block, no tile at all,
plain causal and a short last head group (fp32: bf16 through tensor descriptors comes out garbled in
the Triton 3.6 interpreter, ch18's causal kernel alike); and its sm_90a code at both pairs' bands:
wgmma, TMA, at most 128 registers, no spills, no ptxas advisory, no serialized wgmma, and ch18
``_ahead``'s key-loop order (the K tile waited for after a softmax and a P V product).
GPU: bf16 at a pair-like shape (and empty blocks) against SDPA with the dense mask in fp32."""

from __future__ import annotations

import pytest
import torch
from triton_cpu import (
    assert_tma_and_wgmma,
    compile_sm90,
    cuobjdump,
    fits_sm90,
    key_loop_events,
    ptxas_advisories,
    run_interpreted,
    wgmma_serialized,
)

from aisp.kits.sparse_flash import BLOCK_M, BLOCK_N, LAUNCH, Band, tile_lists

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
    err = (sparse_flash_attention(q, k, v, lists).double() - ref).abs().max().item()
    sf.L2_SHARE = 16 << 20
    assert err < 2e-5, (band, seq, bm, bn, err)
    if band.span == 0:
        assert int(lists.offsets[-1]) == 0 and ref.abs().max() == 0
wrong = tile_lists(Band(40).visible, Band(40), 128, "cpu", 32, 16)
q, k, v = (torch.randn(1, 1, 128, 32, generator=gen) for _ in range(3))
pos = torch.arange(128)
err = (sparse_flash_attention(q, k, v, wrong).double() - reference(q, k, v, Band(48).visible(pos[:, None], pos[None, :])))
assert err.abs().max() > 1e-2, "another band's answer passed"
with pytest.raises(ValueError, match="lists for seq 128"):
    sparse_flash_attention(*(torch.randn(1, 1, 64, 32) for _ in range(3)), wrong)
print("interpreted ok")
"""


def test_kernel_matches_fp64_under_the_interpreter() -> None:
    run_interpreted(INTERPRETED)


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


@pytest.mark.gpu
def test_kernel_matches_masked_sdpa_on_a_gpu() -> None:
    """bf16, 2 x 4 heads of 4,096 tokens, head dim 128, at the kit's tiles: both pairs' bands, and a band
    with no key (every list empty: zeros), against SDPA on the dense mask in fp32."""
    import torch.nn.functional as F

    from aisp.kits.sparse_flash import sparse_flash_attention

    gen = torch.Generator(device="cuda").manual_seed(0)
    seq = 4096
    q, k, v = (torch.randn(2, 4, seq, 128, generator=gen, device="cuda").bfloat16() for _ in range(3))
    for band in (*PAIR_BANDS.values(), Band(0)):
        mask = dense(band, seq).cuda()
        out = sparse_flash_attention(q, k, v, tile_lists(band.visible, band, seq, "cuda"))
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask).nan_to_num(0.0)
        torch.testing.assert_close(out.float(), ref, atol=2e-2, rtol=2e-2)
