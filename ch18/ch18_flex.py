"""What chapter 18's FlexAttention pairs share: the compiled kernels, packed documents, and a decode
``BlockMask`` built straight from each row's position.

``flex_attention`` must be compiled: eager it materializes every score (and ignores the block
structure); compiled, Inductor generates one Triton kernel that visits only the listed blocks. On a
CPU the pairs run the eager forms (same answers, for the tests).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention

BLOCK = 128
"""FlexAttention's default block: a BlockMask lists 128 x 128 tiles."""
_FLEX = torch.compile(flex_attention, dynamic=False)
_BLOCK_MASK = torch.compile(create_block_mask, dynamic=False)
MaskMod = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def flex_on(device: torch.device) -> Callable[..., torch.Tensor]:
    """``flex_attention`` compiled on a GPU, eager (the reference path) on a CPU."""
    return _FLEX if device.type == "cuda" else flex_attention


def block_mask_on(device: torch.device) -> Callable[..., BlockMask]:
    """``create_block_mask`` compiled on a GPU (fused: no (S, S) mask in memory), eager on a CPU."""
    return _BLOCK_MASK if device.type == "cuda" else create_block_mask


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
