"""What chapter 18's FlexAttention pairs share: the compiled kernel, packed documents, and the
``BlockMask``s built straight from the structure (document boundaries, each decode row's position)
in a few tensor ops, so only ``flex_attention`` is ever compiled.

``flex_attention`` must be compiled: eager it materializes every score (and ignores the block
structure); compiled, Inductor generates one Triton kernel that visits only the listed blocks. On a
CPU the pairs run the eager forms (same answers, for the tests).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import torch
from torch.nn.attention.flex_attention import BlockMask, flex_attention

BLOCK = 128
"""FlexAttention's default block: a BlockMask lists 128 x 128 tiles."""
_FLEX = torch.compile(flex_attention, dynamic=False)
MaskMod = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def flex_on(device: torch.device) -> Callable[..., torch.Tensor]:
    """``flex_attention`` compiled on a GPU, eager (the reference path) on a CPU."""
    return _FLEX if device.type == "cuda" else flex_attention


def document_lengths(seq: int, rows: int, median: int, spread: float, longest: int, seed: int = 0) -> list[list[int]]:
    """Per packed row, the lengths of its documents (log-normal, clipped to 16..longest), filling
    ``seq`` tokens exactly: documents are drawn in turn and the one that overflows a row is cut."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(rows):
        lengths: list[int] = []
        while sum(lengths) < seq:
            draw = torch.randn(1, generator=gen, dtype=torch.float64).mul(spread).exp().mul(median).item()
            lengths.append(min(max(16, round(draw)), longest, seq - sum(lengths)))
        out.append(lengths)
    return out


def document_starts(lengths: list[list[int]], device: torch.device) -> torch.Tensor:
    """(rows, seq) bool: True at every document's first token."""
    starts = torch.zeros(len(lengths), sum(lengths[0]), dtype=torch.bool)
    for row, docs in enumerate(lengths):
        starts[row, torch.tensor([0, *docs[:-1]]).cumsum(0)] = True
    return starts.to(device)


def causal_document_mask(doc: torch.Tensor) -> MaskMod:
    """A query sees the keys at or before it in its own document; ``doc`` (rows, seq) holds each
    token's document id and may be rewritten between calls (the closure reads it then)."""
    def mask_mod(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        return (doc[b, q] == doc[b, kv]) & (q >= kv)
    return mask_mod


def sliding_window_mask(pos: torch.Tensor, window: int) -> MaskMod:
    """Decode: row b's one query, at position ``pos[b]``, sees keys pos - window + 1 .. pos."""
    def mask_mod(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        return (kv <= pos[b]) & (pos[b] - kv < window)
    return mask_mod


def window_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pos: torch.Tensor, window: int,
                  kernel_options: dict[str, int] | None = None) -> torch.Tensor:
    """A sliding-window decode step whole: the mask and BlockMask from ``pos``, then flex_attention."""
    block_mask = window_block_mask(pos, window, k.shape[2], sliding_window_mask(pos, window))
    return flex_attention(q, k, v, block_mask=block_mask, enable_gqa=True, kernel_options=kernel_options)


_WINDOW_DECODE = torch.compile(window_decode, dynamic=False, fullgraph=True)


def window_decode_on(device: torch.device) -> Callable[..., torch.Tensor]:
    """:func:`window_decode` compiled as ONE graph on a GPU (Inductor fuses the BlockMask's ~11 index
    ops into one or two kernels beside the flex kernels), eager on a CPU."""
    return _WINDOW_DECODE if device.type == "cuda" else window_decode


def splits_follow_the_mask() -> bool:
    """Whether the installed flex-decoding template sizes a program's share of a row's keys from the
    row's listed blocks (``kv_num_blocks * SPARSE_KV_BLOCK_SIZE / SPLIT_KV``; PyTorch PR 167935) and
    not from the cache length (``KV_LEN / SPLIT_KV``), when no full blocks are listed."""
    try:
        from torch._inductor.kernel.flex.common import load_flex_template
        return "tl.cdiv(kv_num_blocks * SPARSE_KV_BLOCK_SIZE, SPLIT_KV)" in load_flex_template("flex_decode")
    except (ImportError, OSError):
        return False


def window_block_mask(pos: torch.Tensor, window: int, kv_len: int, mask_mod: MaskMod) -> BlockMask:
    """The decode BlockMask of :func:`sliding_window_mask` from ``pos`` (rows,) in a few small ops:
    per row one query block whose key blocks are first..last (window edges masked per element),
    listed first in a rotation of all key blocks (the layout BlockMask expects). O(rows x kv_len /
    128) work, no pass over the (rows, kv_len) mask."""
    first = (pos - window + 1).clamp(min=0) // BLOCK
    count = (pos // BLOCK - first + 1).to(torch.int32)
    blocks = -(-kv_len // BLOCK)
    indices = ((first[:, None] + torch.arange(blocks, device=pos.device)) % blocks).to(torch.int32)
    return BlockMask.from_kv_blocks(count[:, None, None], indices[:, None, None], mask_mod=mask_mod,
                                    seq_lengths=(1, kv_len), compute_q_blocks=False)


@cache
def _below(tiles: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(tiles, tiles) bool: key tile strictly before the query tile; and the diagonal."""
    i = torch.arange(tiles, device=device)
    return i[None, :] < i[:, None], i[None, :] == i[:, None]


def document_block_mask(doc: torch.Tensor, mask_mod: MaskMod) -> BlockMask:
    """The BlockMask of :func:`causal_document_mask` from ``doc`` (rows, seq), any non-decreasing ids
    (what ``cumsum`` of start flags gives), in ~10 small ops over (rows, tiles, tiles), no pass over
    the (S, S) pairs. Ids only grow, so a key tile j before query tile i holds a visible pair iff
    its last id equals the query tile's first, and is full iff its first id equals the query
    tile's last (one document spans both); a diagonal tile is always partial (causal). Indices
    come in create_block_mask's order (listed tiles first, ascending); no q-side lists (forward only)."""
    rows, seq = doc.shape
    if seq % BLOCK:
        raise ValueError(f"sequence length {seq} is not a multiple of {BLOCK}")
    below, diagonal = _below(seq // BLOCK, doc.device)
    tiles = doc.view(rows, seq // BLOCK, BLOCK)
    first, last = tiles[:, None, :, 0], tiles[:, None, :, -1]  # (rows, 1, tiles): as key tiles j
    full = below & (first == last.mT)
    partial = (below & (last == first.mT) & ~full) | diagonal
    dense = torch.stack((partial, full))[:, :, None].to(torch.int32)  # (2, rows, 1, tiles, tiles)
    counts = dense.sum(-1, dtype=torch.int32)
    indices = dense.argsort(dim=-1, descending=True, stable=True).to(torch.int32)
    return BlockMask.from_kv_blocks(counts[0], indices[0], counts[1], indices[1], BLOCK_SIZE=BLOCK,
                                    mask_mod=mask_mod, seq_lengths=(seq, seq), compute_q_blocks=False)
