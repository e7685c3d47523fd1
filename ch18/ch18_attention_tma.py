"""Our flash attention forward kernel rewritten for Hopper: K/V tiles by TMA, heads launched in L2-sized groups.

Same math and layout as ``ch18_attention.flash_attention`` (a program per head and BLOCK_M queries,
online softmax in base 2, only the causal diagonal block masked, longest query blocks first). Changes:

- Launch order: that kernel starts the last query block of all 128 heads, then the next-to-last of
  all: the ~132 resident programs read 128 different K/V streams (2 MiB each here, 5x the 50 MB
  L2), so K/V come from HBM, ~4.4 GB a call (~1 ms of a 1.4 ms kernel at 4.2 TB/s). Here heads go
  in groups of ``head_group`` (8 here, 16 MiB of K/V), a group's blocks longest first, its heads
  fastest: resident programs share a few heads' K/V through L2.
- Q, K, V, O move through device-side tensor descriptors over the (batch*heads*seq, head_dim) rows:
  on sm_90 a tile is one TMA copy (``cp.async.bulk.tensor``) issued by one thread into shared memory,
  instead of 16-byte ``cp.async`` per thread with per-thread addresses (203 registers instead of 240
  at 128 x 128 tiles); ``tl.range`` pipelines them over the wgmma and the softmax.
- The scale is folded into the exponent, P = exp2(S * c - m): one FMA per score, not a mul and a sub.

Device-side descriptors need per-program global scratch, which Triton takes at launch from the
allocator of ``triton.set_allocator``: ``flash_attention_tma`` sets PyTorch's before each CUDA launch
(``aisp.kits.tma``; a context variable, so a launch from another thread finds it too). The Triton interpreter runs the
same descriptor code on a CPU (Triton 3.6 supports it), so there is no pointer fallback.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from ch18_attention import check_inputs

from aisp.kits.flash_parts import pv_step as _pv
from aisp.kits.flash_parts import row_tiles as _rows
from aisp.kits.tma import use_torch_scratch

CONFIGS = [triton.Config({"BLOCK_M": 128, "BLOCK_N": bn}, num_warps=8, num_stages=s, maxnreg=reg)
           for bn, s, reg in ((128, 2, None), (64, 2, 128), (64, 2, None), (128, 3, None))]
"""Hopper, head_dim 128, bf16; four (each compile costs seconds of the chapter's budget). 128 queries
over 8 warps (two warpgroups of 64 rows issuing wgmma; one warpgroup would need 253 registers, 64-row
tiles move twice the K/V per FLOP). (128 keys, 2 stages): the biggest wgmma per barrier, 161 KB of
shared memory, one program per SM. (64, 2, capped at 128 registers): 96 KB, so two programs share an
SM and one's softmax can overlap the other's wgmma (FlashAttention-3's ping-pong, left to the warp
schedulers); the autotuner chose it on an H200 (2026-11-28, 60.5% of the bf16 peak), but at that cap
ptxas serializes every wgmma (advisory C7512; one WARPGROUP.DEPBAR.LE 0x0 per HGMMA in the SASS;
cause and fix in ch18_attention_pvwait.py: the P V wgmma left in flight across the back edge).
(64, 2, uncapped): the same tiles at 138 registers, wgmma left asynchronous, one program per SM: added
to let the GPU decide between the two (not yet timed). (128, 3): one more K/V pair in flight (225 of
227 KB) in case TMA latency shows.
tests/test_ch18_triton.py compiles each for sm_90: wgmma, TMA, no spills, the cap met."""

L2_SHARE = 16 << 20
"""Bytes of K/V the resident programs share: a third of the H100/H200 L2, room for two groups at once."""


@triton.jit
def _softmax(m_i, l_i, s, offs_m, start, qk_scale, BLOCK_N: tl.constexpr, DIAGONAL: tl.constexpr):
    """Online softmax of one key tile (keys start..) given its unscaled scores s = Q K^T: masks key >
    query where ``DIAGONAL``; returns P = exp2(s * c - m_new), alpha = exp2(m_i - m_new), m_new, l_new.
    m_i and l_i are in the scaled base-2 domain."""
    if DIAGONAL:
        keys = start + tl.arange(0, BLOCK_N)
        s = tl.where(offs_m[:, None] >= keys[None, :], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
    p = tl.exp2(s * qk_scale - m_new[:, None])
    alpha = tl.exp2(m_i - m_new)
    return p, alpha, m_new, l_i * alpha + tl.sum(p, 1)


@triton.jit
def _key_tiles(acc, m_i, l_i, q, k_desc, v_desc, head_row, offs_m, lo, hi, qk_scale, BLOCK_N: tl.constexpr,
               DIAGONAL: tl.constexpr):
    """Online softmax over the keys [lo, hi) of the head starting at ``head_row``; masks key > query
    only where ``DIAGONAL``."""
    for start in tl.range(lo, hi, BLOCK_N):
        s = tl.dot(q, k_desc.load([head_row + start, 0]).T)
        p, alpha, m_i, l_i = _softmax(m_i, l_i, s, offs_m, start, qk_scale, BLOCK_N, DIAGONAL)
        acc = _pv(acc, p, alpha, v_desc, head_row + start)
    return acc, m_i, l_i


@triton.jit
def _program_tile(n_heads, n_blocks, HEAD_GROUP: tl.constexpr):
    """(head, query block) of this program: heads in groups of HEAD_GROUP, a group's query blocks
    from the last (longest) to the first, the group's heads fastest; the last group may be smaller."""
    pid = tl.program_id(0)
    first = pid // (HEAD_GROUP * n_blocks) * HEAD_GROUP
    size = tl.minimum(HEAD_GROUP, n_heads - first)
    r = pid - first * n_blocks
    return first + r % size, n_blocks - 1 - r // size


@triton.jit
def _flash_fwd_tma(q_ptr, k_ptr, v_ptr, o_ptr, n_heads, seq, qk_scale, D: tl.constexpr, CAUSAL: tl.constexpr,
                   KEY_LOOP: tl.constexpr, HEAD_GROUP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   ONE_LOOP: tl.constexpr = False):
    """One program: O = softmax(Q K^T * scale) V for BLOCK_M queries of one head (``_program_tile``),
    keys walked by KEY_LOOP (``_key_tiles`` or a function of its arguments): once for the keys before
    the causal diagonal block and once for that block, or with ``ONE_LOOP`` once for all (its DIAGONAL
    then says whether some tiles need the causal mask)."""
    head, start_m = _program_tile(n_heads, seq // BLOCK_M, HEAD_GROUP)
    rows = n_heads * seq
    head_row = head * seq
    q_row = head_row + start_m * BLOCK_M
    k_desc, v_desc = _rows(k_ptr, rows, D, BLOCK_N), _rows(v_ptr, rows, D, BLOCK_N)
    q = _rows(q_ptr, rows, D, BLOCK_M).load([q_row, 0])
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, D), tl.float32)
    hi = start_m * BLOCK_M if CAUSAL else seq
    if ONE_LOOP:
        end = hi + BLOCK_M if CAUSAL else hi
        acc, m_i, l_i = KEY_LOOP(acc, m_i, l_i, q, k_desc, v_desc, head_row, offs_m, 0, end, qk_scale, BLOCK_N, CAUSAL)
    else:
        acc, m_i, l_i = KEY_LOOP(acc, m_i, l_i, q, k_desc, v_desc, head_row, offs_m, 0, hi, qk_scale, BLOCK_N, False)
        if CAUSAL:
            acc, m_i, l_i = KEY_LOOP(acc, m_i, l_i, q, k_desc, v_desc, head_row, offs_m, hi, hi + BLOCK_M, qk_scale,
                                     BLOCK_N, True)
    out = acc / l_i[:, None]
    _rows(o_ptr, rows, D, BLOCK_M).store([q_row, 0], out.to(o_ptr.dtype.element_ty))


_flash_tma_tuned = triton.autotune(CONFIGS, key=["seq", "D", "CAUSAL", "HEAD_GROUP"])(_flash_fwd_tma)


def head_group(q: torch.Tensor) -> int:
    """Heads whose K and V (2 x seq x head_dim each) fit in ``L2_SHARE`` bytes, at least one, at most all."""
    batch, heads, seq, dim = q.shape
    return max(1, min(batch * heads, L2_SHARE // (2 * seq * dim * q.element_size())))


@dataclass(frozen=True)
class KeyLoop:
    """What a variant of ``_flash_fwd_tma`` chooses: its key loop and its autotune set."""

    name: str
    """The variant's public function, named in its error messages."""
    tiles: triton.runtime.JITFunction
    """The key loop (``_key_tiles``' arguments and results)."""
    tuned: triton.runtime.Autotuner
    """``_flash_fwd_tma`` autotuned over the variant's configs (keyed by shape, causal and head group)."""
    one_loop: bool = False
    """Whether ``tiles`` walks all keys in one call, the causal diagonal block included (``ONE_LOOP``)."""


TMA = KeyLoop("flash_attention_tma", _key_tiles, _flash_tma_tuned)


def flash_attention_tma(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True,
                        blocks: tuple[int, int] | None = None, group: int | None = None) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) [causal]) v for contiguous q, k, v (batch, heads, seq, head_dim),
    moved by TMA. ``blocks`` (BLOCK_M, BLOCK_N) fixes the tiles (BLOCK_M a multiple of BLOCK_N, both
    dividing seq); None autotunes on a GPU (seq a multiple of 128) and takes (32, 16) elsewhere.
    ``group``: heads launched together (None: ``head_group``; batch x heads: the launch order of
    ``ch18_attention.flash_attention``)."""
    return launch(TMA, q, k, v, causal, blocks, group)


def launch(loop: KeyLoop, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
           blocks: tuple[int, int] | None, group: int | None) -> torch.Tensor:
    """``_flash_fwd_tma`` with ``loop``'s key loop on q, k, v (``flash_attention_tma`` says what the
    arguments mean): checks them, then autotunes (``blocks`` None on a GPU) or runs the given tiles."""
    batch, heads, seq, dim = q.shape
    qk_scale = check_inputs(loop.name, q, k, v)
    group = head_group(q) if group is None else group
    if group < 1 or (dim * q.element_size()) % 16 or any(t.data_ptr() % 16 for t in (q, k, v)):
        raise ValueError(f"{loop.name}: group {group}, rows of {dim * q.element_size()} bytes: TMA needs "
                         "rows and bases aligned to 16 bytes")
    out = torch.empty_like(q)
    n_heads = batch * heads
    if q.is_cuda:
        use_torch_scratch()
    if blocks is None and q.is_cuda:
        if seq % 128:
            raise ValueError(f"{loop.name}: seq {seq} is not a multiple of 128")
        grid = lambda meta: (n_heads * (seq // meta["BLOCK_M"]),)  # noqa: E731
        loop.tuned[grid](q, k, v, out, n_heads, seq, qk_scale, D=dim, CAUSAL=causal, KEY_LOOP=loop.tiles,
                         HEAD_GROUP=group, ONE_LOOP=loop.one_loop)
        return out
    bm, bn = blocks or (32, 16)
    if seq % bm or bm % bn:
        raise ValueError(f"{loop.name}: blocks {bm}, {bn} do not tile seq {seq}")
    _flash_fwd_tma[(n_heads * (seq // bm),)](q, k, v, out, n_heads, seq, qk_scale, D=dim, CAUSAL=causal,
                                             KEY_LOOP=loop.tiles, HEAD_GROUP=group, BLOCK_M=bm, BLOCK_N=bn,
                                             ONE_LOOP=loop.one_loop)
    return out
