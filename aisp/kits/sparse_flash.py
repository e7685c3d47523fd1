"""Block-sparse flash attention forward for Hopper in Triton: each query block walks only its listed key tiles.

What a FlexAttention ``BlockMask`` says, in our own form (``TileLists``, built once from a mask rule):
per query block of BLOCK_M rows, the key tiles of BLOCK_N keys it sees at all, the full ones (every
pair visible) first, then the partial ones. The kernel walks that list and evaluates the element
mask only on the partial tiles. The element mask is a ``Band``: causal, at most ``span`` - 1 keys back,
and the first ``sink`` keys (a sliding window: sink 0; window plus sink tokens; plain causal: span
>= seq). ``tile_lists`` classifies the tiles by the caller's own rule and checks that the band is
that rule, so the tiles the kernel masks are masked by the same definition the list came from.

The kernel is the flash loop of ch18's fastest Triton variant (``ch18_attention_ahead``), written
again here for listed tiles: Q, K, V, O through device-side TMA descriptors over the
(batch*heads*seq, head_dim) rows, 128 x 64 tiles, 8 warps, 2 stages, at most 128 registers (two
programs an SM); each P V wgmma waited for in its iteration through an empty inline-asm statement
(``_settled``: without it ptxas serializes every wgmma at 128 registers, advisory C7512); and each
tile's Q K^T issued at the end of the previous tile, so the K copy Triton's pipeliner issues last in an
iteration is waited for after a softmax and a P V product. Programs go in L2-sized head groups, a
group's query blocks in the list's launch order (most tiles first), its heads fastest.

What the lists cost at 128 registers (compiled for sm_90a without a GPU, tests/test_kits_sparse_flash.py):
the tile number is carried from one iteration to the next, one scalar load a tile (loading both
tiles' numbers each iteration let Triton's pipeliner stage one through shared memory: a cp.async, a
wait and a fourth bar.sync a tile); the band's span and sink are constexpr, and with the sink a whole
number of key tiles the mask is two compares an element against per-row bounds (a per-column reach
kept 16 more registers live and spilled). 342 SASS instructions an unmasked key tile, 509 a masked
one (ch18 ``_ahead``: 325 and 474); no spills, no ptxas advisory.

Packed documents (``document_flash_attention``): query t of a packed row sees keys s(t) .. t, s(t) its
document's first token (``document_layout`` makes s from the start flags, a running max, and a launch
order). No lists: s only grows along a row, so a program finds its own tiles from s at its block's
first and last queries (r0, r1): key tiles s(r0) // BLOCK_N up to the diagonal block's last, the ones
before the block full where they begin at or after s(r1), all others (the documents' edges, the
diagonal block) masked by start <= key <= query, the start per row loaded once. The walk is the
band's: full tiles first, then the partial ones (their numbers computed, not loaded), one chain.
Every tile it visits holds a visible pair and every row sees itself. Compiled for sm_90a (same
tiles and launch settings): 128 registers, no spills, no ptxas advisory, 334 SASS instructions an
unmasked key tile, 484 a masked one (a third loop, masking the tiles before the block by the start
alone, spilled 16-64 bytes across the loops). The band kernel's code is unchanged by this mode (SASS
compared with addresses stripped). ``grouped=True`` launches the programs as the band mode does (its
``HEAD_GROUP``; ``document_layout(grouped=True)`` orders a row's blocks together, the rows by their
longest block): a row at a time, its heads in L2-sized groups, a group's blocks longest first, its heads
fastest, so the resident programs walk the same documents' K/V tiles; the default mapping compiles to
the same SASS as before the option (compared by hand), the grouped one to 128 registers, no spills.

``sparse_flash_attention(..., host=True)`` runs the same key loop in ``_sparse_flash_fwd_host``, whose Q,
K, V, O descriptors are kernel parameters the host makes (``TensorDescriptor``), not four descriptors each
program writes to global scratch and fences before its first copy. Compiled for sm_90a: 128 registers,
no advisory, 357 / 508 SASS instructions an unmasked / masked tile (parameter addresses moved to uniform
registers at each copy), two values (8 bytes of stack) kept across the loops for O's store. Not yet
measured on a GPU; the band kernel's code is unchanged by it (SASS compared byte for byte).

Rows that see no key (a query block with an empty list, or rows a partial tile masks whole) give 0,
as FlexAttention's do: the masked softmax keeps the running max at -inf without NaN, and the final
division uses 1 for an empty row sum. The Triton interpreter runs the same code on a CPU (inline asm
aside: there ``_settled`` is the identity).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from aisp.kits.flash_parts import pv_step as _pv
from aisp.kits.flash_parts import row_tiles as _rows
from aisp.kits.flash_parts import settled as _settled
from aisp.kits.tma import use_torch_scratch

BLOCK_M, BLOCK_N = 128, 64
"""Hopper, head_dim 128, bf16: ch18 ``_ahead``'s tiles (96 KB of shared memory at 2 stages)."""
LAUNCH = {"num_warps": 8, "num_stages": 2, "maxnreg": 128}
"""ch18 ``_ahead``'s launch settings on a GPU: two warpgroups of 64 rows, 2 stages, two programs an SM."""
L2_SHARE = 16 << 20
"""Bytes of K/V the resident programs share (a third of the H100/H200 L2)."""
DOCUMENT: tl.constexpr = tl.constexpr(2)
"""``_softmax``'s mask on a packed document's partial tiles: the row's document start <= key <= query."""


@dataclass(frozen=True)
class Band:
    """The element mask the kernel applies on partial tiles: key ``kv`` is visible to query ``q`` when
    kv <= q and (q - kv < span or kv < sink)."""

    span: int
    sink: int = 0

    def visible(self, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
        return (kv <= q) & ((q - kv < self.span) | (kv < self.sink))


@dataclass(frozen=True)
class TileLists:
    """Per query block, the key tiles to walk (a CSR over query blocks), as ``tile_lists`` builds them."""

    band: Band
    seq: int
    block_m: int
    block_n: int
    offsets: torch.Tensor
    """int32 (blocks + 1,): query block b walks ``indices[offsets[b]:offsets[b + 1]]``."""
    full: torch.Tensor
    """int32 (blocks,): how many of them, from the first, are full (no element mask)."""
    indices: torch.Tensor
    """int32: key tile numbers (key // block_n), each block's full tiles, then its partial ones."""
    order: torch.Tensor
    """int32 (blocks,): the launch order of the query blocks, most tiles first (ties by position)."""

    def counts(self) -> tuple[int, int]:
        """(tiles, partial tiles) one head computes."""
        return int(self.offsets[-1]), int(self.offsets[-1]) - int(self.full.sum())


def tile_lists(rule: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], band: Band, seq: int,
               device: torch.device | str, block_m: int = BLOCK_M, block_n: int = BLOCK_N) -> TileLists:
    """The tiles of ``rule`` (``rule(q, kv)``: whether query q sees key kv, broadcasting) at block_m x
    block_n, evaluated on every pair, a chunk of query blocks at a time. Raises ValueError unless the
    tiles divide seq and ``band`` is the rule on every pair (the kernel masks partial tiles by it)."""
    if seq % block_m or seq % block_n:
        raise ValueError(f"tile_lists: tiles {block_m} x {block_n} do not divide seq {seq}")
    pos = torch.arange(seq, device=device)
    n_q, n_k = seq // block_m, seq // block_n
    step = max(1, (1 << 24) // (block_m * seq))
    seen, full = [], []
    for first in range(0, n_q, step):
        q = pos[first * block_m:(first + step) * block_m, None]
        mask = rule(q, pos[None, :])
        if not torch.equal(mask, band.visible(q, pos[None, :])):
            raise ValueError(f"tile_lists: {band} is not the rule in query blocks {first}..")
        tiles = mask.view(-1, block_m, n_k, block_n)
        seen.append(tiles.any(3).any(1))
        full.append(tiles.all(3).all(1))
    any_, all_ = torch.cat(seen), torch.cat(full)
    # sort each block's tiles: full ones first, then partial ones, each by key position
    key = (torch.arange(n_q, device=device)[:, None] * 2 * n_k + torch.where(all_, 0, n_k)
           + torch.arange(n_k, device=device))
    indices = (key[any_].sort().values % n_k).to(torch.int32)
    counts = any_.sum(1)
    offsets = torch.zeros(n_q + 1, dtype=torch.int32, device=device)
    offsets[1:] = counts.cumsum(0)
    order = torch.sort(counts, descending=True, stable=True).indices.to(torch.int32)
    return TileLists(band, seq, block_m, block_n, offsets, all_.sum(1).to(torch.int32), indices, order)


@triton.jit
def _softmax(m_i, l_i, s, offs_m, lower, tile, qk_scale, SPAN: tl.constexpr, SINK: tl.constexpr, BLOCK_N: tl.constexpr,
             MASK: tl.constexpr):
    """Online softmax (base 2, scale folded in) of key tile ``tile``'s scores s = Q K^T. MASK: 0 (False)
    none; 1 (True) the band; ``DOCUMENT`` lower <= key <= query (``lower``: per row, its document's
    first token; read in that mode only). Masked, a row with no visible key so far keeps max -inf and
    p = 0 (no NaN)."""
    if MASK:
        keys = (tile * BLOCK_N + tl.arange(0, BLOCK_N))[None, :]
        if MASK == DOCUMENT:
            s = tl.where((keys <= offs_m[:, None]) & (keys >= lower[:, None]), s, float("-inf"))
        elif SINK % BLOCK_N == 0:  # a tile holds sink keys only or none: the window's far edge is per row
            far = tl.where(tile * BLOCK_N < SINK, -1, offs_m - SPAN)[:, None]
            s = tl.where((keys <= offs_m[:, None]) & (keys > far), s, float("-inf"))
        else:
            near = (keys > (offs_m - SPAN)[:, None]) | (keys < SINK)
            s = tl.where((keys <= offs_m[:, None]) & near, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
    else:
        m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
        m_use = m_new
    p = tl.exp2(s * qk_scale - m_use[:, None])
    alpha = tl.exp2(m_i - m_use)
    return p, alpha, m_new, l_i * alpha + tl.sum(p, 1)


@triton.jit
def _tile_then_next(acc, m_i, l_i, s, q, k_desc, v_desc, head_row, offs_m, lower, tile, nxt, qk_scale,
                    SPAN: tl.constexpr, SINK: tl.constexpr, BLOCK_N: tl.constexpr, MASK: tl.constexpr):
    """Tile ``tile``'s softmax (its scores ``s``) and P V, then tile ``nxt``'s scores."""
    p, alpha, m_i, l_i = _softmax(m_i, l_i, s, offs_m, lower, tile, qk_scale, SPAN, SINK, BLOCK_N, MASK)
    acc = _settled(_pv(acc, p, alpha, v_desc, head_row + tile * BLOCK_N))
    s = tl.dot(q, k_desc.load([head_row + nxt * BLOCK_N, 0]).T)
    return acc, m_i, l_i, s


@triton.jit
def _walk(acc, m_i, l_i, q, k_desc, v_desc, head_row, offs_m, tiles, n_full, n, qk_scale, SPAN: tl.constexpr,
          SINK: tl.constexpr, BLOCK_N: tl.constexpr):
    """The ``n`` listed tiles at ``tiles`` in one chain, the first ``n_full`` unmasked; the last always
    masked (a full tile is all visible under the band, so that costs only instructions). With ``n`` 0
    (no branch: one costs a register, spilled at 128) the chain runs key tile 0 masked: the band masks
    it whole, since the block sees no key (``tile_lists`` checked the band is the rule), and the rows
    give 0."""
    tile = tl.load(tiles, mask=n > 0, other=0)
    s = tl.dot(q, k_desc.load([head_row + tile * BLOCK_N, 0]).T)
    split = tl.minimum(n_full, n - 1)
    for i in tl.range(0, split):
        nxt = tl.load(tiles + i + 1)
        acc, m_i, l_i, s = _tile_then_next(acc, m_i, l_i, s, q, k_desc, v_desc, head_row, offs_m, offs_m, tile, nxt,
                                           qk_scale, SPAN, SINK, BLOCK_N, False)
        tile = nxt
    for i in tl.range(split, n - 1):
        nxt = tl.load(tiles + i + 1)
        acc, m_i, l_i, s = _tile_then_next(acc, m_i, l_i, s, q, k_desc, v_desc, head_row, offs_m, offs_m, tile, nxt,
                                           qk_scale, SPAN, SINK, BLOCK_N, True)
        tile = nxt
    p, alpha, m_i, l_i = _softmax(m_i, l_i, s, offs_m, offs_m, tile, qk_scale, SPAN, SINK, BLOCK_N, True)
    return _pv(acc, p, alpha, v_desc, head_row + tile * BLOCK_N), m_i, l_i


@triton.jit
def _program_start(q_ptr, k_ptr, v_ptr, rows, q_row, block, D: tl.constexpr, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr):
    """A program's K and V descriptors over the (rows, D) rows, its Q tile (rows q_row..), its queries'
    positions in the sequence, and the empty softmax state (max -inf, sum 0, acc 0)."""
    k_desc, v_desc = _rows(k_ptr, rows, D, BLOCK_N), _rows(v_ptr, rows, D, BLOCK_N)
    q = _rows(q_ptr, rows, D, BLOCK_M).load([q_row, 0])
    offs_m = block * BLOCK_M + tl.arange(0, BLOCK_M)
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    return k_desc, v_desc, q, offs_m, m_i, tl.zeros((BLOCK_M,), tl.float32), tl.zeros((BLOCK_M, D), tl.float32)


@triton.jit
def _head_group_entry(p, n_heads, n_blocks, HEAD_GROUP: tl.constexpr):
    """Program ``p`` of ``n_heads`` heads x ``n_blocks`` entries a head, the heads in groups of HEAD_GROUP
    (the last group may be smaller), a group's entries in turn, its heads fastest: (head, entry index)."""
    first = p // (HEAD_GROUP * n_blocks) * HEAD_GROUP
    size = tl.minimum(HEAD_GROUP, n_heads - first)
    r = p - first * n_blocks
    return first + r % size, r // size


@triton.jit
def _list_entry(offsets, order, n_heads, seq, HEAD_GROUP: tl.constexpr, BLOCK_M: tl.constexpr):
    """This program's query block of the lists (``_head_group_entry``'s mapping, the blocks in ``order``):
    (block, its first list entry, its tile count, its head's first row, its first query's row)."""
    head, i = _head_group_entry(tl.program_id(0), n_heads, seq // BLOCK_M, HEAD_GROUP)
    block = tl.load(order + i)
    start = tl.load(offsets + block)
    head_row = head * seq
    return block, start, tl.load(offsets + block + 1) - start, head_row, head_row + block * BLOCK_M


@triton.jit
def _sparse_flash_fwd(q_ptr, k_ptr, v_ptr, o_ptr, offsets, full, indices, order, n_heads, seq, qk_scale,
                      SPAN: tl.constexpr, SINK: tl.constexpr, D: tl.constexpr, HEAD_GROUP: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """One program: BLOCK_M queries of one head over their listed key tiles. Heads in groups of
    HEAD_GROUP, a group's query blocks in ``order``, the group's heads fastest (the last group may be
    smaller)."""
    block, start, n, head_row, q_row = _list_entry(offsets, order, n_heads, seq, HEAD_GROUP, BLOCK_M)
    rows = n_heads * seq
    k_desc, v_desc, q, offs_m, m_i, l_i, acc = _program_start(q_ptr, k_ptr, v_ptr, rows, q_row, block, D, BLOCK_M, BLOCK_N)
    acc, m_i, l_i = _walk(acc, m_i, l_i, q, k_desc, v_desc, head_row, offs_m, indices + start, tl.load(full + block),
                          n, qk_scale, SPAN, SINK, BLOCK_N)
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    _rows(o_ptr, rows, D, BLOCK_M).store([q_row, 0], out.to(o_ptr.dtype.element_ty))


@triton.jit
def _sparse_flash_fwd_host(q_desc, k_desc, v_desc, o_desc, offsets, full, indices, order, n_heads, seq, qk_scale,
                           SPAN: tl.constexpr, SINK: tl.constexpr, HEAD_GROUP: tl.constexpr, BLOCK_M: tl.constexpr,
                           BLOCK_N: tl.constexpr):
    """``_sparse_flash_fwd`` over host-made descriptors (kernel parameters: Q and O of BLOCK_M x D tiles,
    K and V of BLOCK_N x D, over the (n_heads * seq, D) rows): no descriptor written and fenced in each
    program, so its Q and first K/V copies go out as soon as its list entry is read."""
    block, start, n, head_row, q_row = _list_entry(offsets, order, n_heads, seq, HEAD_GROUP, BLOCK_M)
    q = q_desc.load([q_row, 0])
    offs_m = block * BLOCK_M + tl.arange(0, BLOCK_M)
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    acc, m_i, l_i = _walk(tl.zeros(q.shape, tl.float32), m_i, tl.zeros((BLOCK_M,), tl.float32), q, k_desc, v_desc,
                          head_row, offs_m, indices + start, tl.load(full + block), n, qk_scale, SPAN, SINK, BLOCK_N)
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    o_desc.store([q_row, 0], out.to(q.dtype))


@triton.jit
def _document_tile(i, n_full, lead, first, full_from, diagonal):
    """The ``i``-th key tile a document block walks: its full tiles (``full_from`` on), then its ``lead``
    partial tiles before the block (``first`` on), then the diagonal block's."""
    k = i - n_full
    return tl.where(i < n_full, full_from + i, tl.where(k < lead, first + k, diagonal + k - lead))


@triton.jit
def _document_walk(acc, m_i, l_i, q, k_desc, v_desc, head_row, offs_m, lower, first, full_from, diagonal, qk_scale,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Key tiles ``first`` .. the diagonal block's last in one chain, each tile's Q K^T issued at the end
    of the previous one (ch18 ``_ahead``): [full_from, diagonal) unmasked, then [first, full_from) and
    the diagonal block's BLOCK_M // BLOCK_N tiles masked by the rows' document starts and causality."""
    n_full = diagonal - full_from
    lead = full_from - first
    n = n_full + lead + BLOCK_M // BLOCK_N
    tile = _document_tile(0, n_full, lead, first, full_from, diagonal)
    s = tl.dot(q, k_desc.load([head_row + tile * BLOCK_N, 0]).T)
    for i in tl.range(0, n_full):
        nxt = _document_tile(i + 1, n_full, lead, first, full_from, diagonal)
        acc, m_i, l_i, s = _tile_then_next(acc, m_i, l_i, s, q, k_desc, v_desc, head_row, offs_m, lower, tile, nxt,
                                           qk_scale, 0, 0, BLOCK_N, False)
        tile = nxt
    for i in tl.range(n_full, n - 1):
        nxt = _document_tile(i + 1, n_full, lead, first, full_from, diagonal)
        acc, m_i, l_i, s = _tile_then_next(acc, m_i, l_i, s, q, k_desc, v_desc, head_row, offs_m, lower, tile, nxt,
                                           qk_scale, 0, 0, BLOCK_N, DOCUMENT)
        tile = nxt
    p, alpha, m_i, l_i = _softmax(m_i, l_i, s, offs_m, lower, tile, qk_scale, 0, 0, BLOCK_N, DOCUMENT)
    return _pv(acc, p, alpha, v_desc, head_row + tile * BLOCK_N), m_i, l_i


@triton.jit
def _document_flash_fwd(q_ptr, k_ptr, v_ptr, o_ptr, starts, order, n_heads, heads, seq, qk_scale, D: tl.constexpr,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_GROUP: tl.constexpr = 0):
    """One program: BLOCK_M queries of one head of one packed row over the key tiles of their documents,
    found from ``starts`` (per token, its document's first token; non-decreasing along a row, at most
    the token): the first query's start's tile up to the diagonal; a tile before the block is full when
    it begins at or after the last query's start. HEAD_GROUP 0: programs take the (row, query block)
    entries of ``order`` in turn, the row's heads fastest. HEAD_GROUP > 0: ``order`` in chunks of
    seq // BLOCK_M entries (``document_layout(grouped=True)``: a row's blocks each), a chunk's heads in
    groups of HEAD_GROUP (the last one may be smaller), a group's entries in turn, its heads fastest."""
    pid = tl.program_id(0)
    n_blocks = seq // BLOCK_M
    if HEAD_GROUP == 0:
        entry = tl.load(order + pid // heads).to(tl.int32)
    else:
        chunk = pid // (heads * n_blocks)
        p = pid - chunk * (heads * n_blocks)
        head, i = _head_group_entry(p, heads, n_blocks, HEAD_GROUP)
        entry = tl.load(order + chunk * n_blocks + i).to(tl.int32)
    row = entry // n_blocks
    block = entry - row * n_blocks
    if HEAD_GROUP == 0:
        head = pid % heads
    head_row = (row * heads + head) * seq
    q_row = head_row + block * BLOCK_M
    row_starts = starts + row * seq + block * BLOCK_M
    lower = tl.load(row_starts + tl.arange(0, BLOCK_M))
    first = tl.load(row_starts) // BLOCK_N
    diagonal = block * (BLOCK_M // BLOCK_N)
    full_from = tl.minimum(tl.maximum((tl.load(row_starts + BLOCK_M - 1) + BLOCK_N - 1) // BLOCK_N, first), diagonal)
    rows = n_heads * seq
    k_desc, v_desc, q, offs_m, m_i, l_i, acc = _program_start(q_ptr, k_ptr, v_ptr, rows, q_row, block, D, BLOCK_M, BLOCK_N)
    acc, m_i, l_i = _document_walk(acc, m_i, l_i, q, k_desc, v_desc, head_row, offs_m, lower, first, full_from, diagonal,
                                   qk_scale, BLOCK_M, BLOCK_N)
    _rows(o_ptr, rows, D, BLOCK_M).store([q_row, 0], (acc / l_i[:, None]).to(o_ptr.dtype.element_ty))


def head_group(q: torch.Tensor) -> int:
    """Heads whose K and V (2 x seq x head_dim each) fit in ``L2_SHARE`` bytes, at least one, at most all."""
    batch, heads, seq, dim = q.shape
    return max(1, min(batch * heads, L2_SHARE // (2 * seq * dim * q.element_size())))


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, name: str) -> None:
    """Raises ValueError unless q, k, v are contiguous, of one shape, with rows and bases TMA can move."""
    if not (q.is_contiguous() and k.is_contiguous() and v.is_contiguous()) or not q.shape == k.shape == v.shape:
        raise ValueError(f"{name}: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}: contiguous and equal shapes")
    if (q.shape[-1] * q.element_size()) % 16 or any(t.data_ptr() % 16 for t in (q, k, v)):
        raise ValueError(f"{name}: rows of {q.shape[-1] * q.element_size()} bytes: TMA needs rows and bases aligned "
                         "to 16 bytes")


def _launch(q: torch.Tensor) -> dict[str, int]:
    """The launch settings for inputs like ``q``: ``LAUNCH`` on a GPU (PyTorch's allocator given to Triton for
    the descriptors' scratch first), none under the interpreter."""
    if not q.is_cuda:
        return {}
    use_torch_scratch()
    return LAUNCH


def host_descriptors(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, block_m: int,
                     block_n: int) -> tuple[TensorDescriptor, ...]:
    """Q, K, V, O over their (batch * heads * seq, head_dim) rows, as the host passes them to
    ``_sparse_flash_fwd_host``: Q and O in block_m x head_dim tiles, K and V in block_n x head_dim."""
    return tuple(TensorDescriptor.from_tensor(t.view(-1, t.shape[-1]), [block, t.shape[-1]])
                 for t, block in ((q, block_m), (k, block_n), (v, block_n), (out, block_m)))


def sparse_flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, tiles: TileLists,
                           host: bool = False) -> torch.Tensor:
    """softmax(q k^T / sqrt(d), masked by ``tiles``) v for contiguous q, k, v (batch, heads, seq, head_dim)
    of one shape; every head walks the same lists. Rows that see no key give 0. ``host``: the same
    kernel over TMA descriptors made on the host (``_sparse_flash_fwd_host``) instead of by each program."""
    batch, heads, seq, dim = q.shape
    _check(q, k, v, "sparse_flash_attention")
    if seq != tiles.seq or tiles.indices.device != q.device:
        raise ValueError(f"sparse_flash_attention: lists for seq {tiles.seq} on {tiles.indices.device}, inputs "
                         f"seq {seq} on {q.device}")
    out = torch.empty_like(q)
    n_heads = batch * heads
    band = tiles.band
    grid = (n_heads * (seq // tiles.block_m),)
    lists = (tiles.offsets, tiles.full, tiles.indices, tiles.order, n_heads, seq, math.log2(math.e) / math.sqrt(dim))
    shape = {"SPAN": band.span, "SINK": band.sink, "HEAD_GROUP": head_group(q), "BLOCK_M": tiles.block_m,
             "BLOCK_N": tiles.block_n}
    if host:
        _sparse_flash_fwd_host[grid](*host_descriptors(q, k, v, out, tiles.block_m, tiles.block_n), *lists, **shape,
                                     **(LAUNCH if q.is_cuda else {}))
    else:
        _sparse_flash_fwd[grid](q, k, v, out, *lists, D=dim, **shape, **_launch(q))
    return out


class HostDescriptorRun:
    """A pair's ``run`` over ``sparse_flash_attention(host=True)``: mixed in ahead of a benchmark whose
    setup leaves ``q``, ``k``, ``v`` and ``tiles`` (the pairs' ``_hostdesc`` variants)."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    tiles: TileLists

    def run(self) -> torch.Tensor:
        return sparse_flash_attention(self.q, self.k, self.v, self.tiles, host=True)


@cache
def _positions(seq: int, device: torch.device) -> torch.Tensor:
    """int32 0 .. seq - 1 on ``device`` (a constant of the shape, made once)."""
    return torch.arange(seq, dtype=torch.int32, device=device)


def document_layout(flags: torch.Tensor, block_m: int = BLOCK_M, grouped: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """From (rows, seq) bool flags, True at each document's first token (tokens before a row's first
    flag start at 0): each token's document start, int32 (rows, seq), by a running max of the flagged
    positions; and the launch order of the (row, query block) entries, int64 (rows * seq // block_m,),
    longest first: by the tokens from the block's first query back to its document's start (ties by
    position). Four small ops, no pass over the (seq, seq) pairs. ``grouped``: the order in chunks of a
    row's blocks each, each chunk longest first, the rows by their longest block (ties by row), for
    ``document_flash_attention(grouped=True)`` (three more small ops)."""
    rows, seq = flags.shape
    pos = _positions(seq, flags.device)
    starts = torch.where(flags, pos, 0).cummax(-1).values
    since = starts[:, ::block_m] - pos[::block_m]
    if not grouped:
        return starts, since.flatten().argsort(stable=True)
    ranked = since.amin(1).argsort(stable=True)
    return starts, (since[ranked].argsort(dim=1, stable=True) + ranked[:, None] * since.shape[1]).flatten()


def document_tiles(starts: torch.Tensor, block_m: int = BLOCK_M,
                   block_n: int = BLOCK_N) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per (row, query block) of ``starts`` (rows, seq), the key tiles the document kernel walks, as it
    finds them: (first, full_from, diagonal), tiles first .. full_from - 1 and the diagonal block's
    masked, full_from .. diagonal - 1 full. For tests and estimates (the kernel derives them itself)."""
    first = starts[:, ::block_m] // block_n
    diagonal = (torch.arange(0, starts.shape[1], block_m, device=starts.device) // block_n).expand_as(first)
    full_from = torch.minimum(torch.maximum(-(-starts[:, block_m - 1::block_m] // block_n), first), diagonal)
    return first, full_from, diagonal


def document_head_group(q: torch.Tensor) -> int:
    """Heads of one row whose K and V fit in ``L2_SHARE`` bytes (``head_group``'s rule), at most the row's."""
    return min(q.shape[1], head_group(q))


def document_flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, starts: torch.Tensor,
                             order: torch.Tensor, block_m: int = BLOCK_M, block_n: int = BLOCK_N,
                             grouped: bool = False) -> torch.Tensor:
    """Packed-document causal attention: query t of row b sees keys ``starts[b, t]`` .. t, for contiguous
    q, k, v (rows, heads, seq, head_dim) of one shape; ``starts`` and ``order`` as ``document_layout``
    makes them (any order of all entries is correct; longest first balances the SMs). ``grouped``:
    programs go by ``order``'s chunks of seq // block_m entries (``document_layout(grouped=True)``: one
    row's blocks), each chunk's heads in groups of ``document_head_group`` (their K/V fit the L2 share),
    a group's entries in order, its heads fastest: the resident programs walk the same documents."""
    batch, heads, seq, dim = q.shape
    _check(q, k, v, "document_flash_attention")
    if starts.shape != (batch, seq) or starts.dtype != torch.int32 or order.numel() != batch * (seq // block_m):
        raise ValueError(f"document_flash_attention: starts {tuple(starts.shape)} {starts.dtype}, order {order.numel()}:"
                         f" int32 ({batch}, {seq}) and {batch * (seq // block_m)} entries")
    if seq % block_m or block_m % block_n:
        raise ValueError(f"document_flash_attention: tiles {block_m} x {block_n} do not divide seq {seq}")
    out = torch.empty_like(q)
    launch = _launch(q)
    _document_flash_fwd[(batch * heads * (seq // block_m),)](
        q, k, v, out, starts.contiguous(), order, batch * heads, heads, seq, math.log2(math.e) / math.sqrt(dim), D=dim,
        BLOCK_M=block_m, BLOCK_N=block_n, HEAD_GROUP=document_head_group(q) if grouped else 0, **launch)
    return out
