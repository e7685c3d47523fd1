"""The ahead flash attention kernel over TMA descriptors made on the host: Q, K, V and O reach each
program as kernel parameters instead of four descriptors it writes to global scratch and fences.

Same key loop, tiles and launch settings as ``ch18_attention_ahead`` (``_key_tiles_ahead``: one chain
over all keys, each tile's Q K^T issued at the end of the previous tile; 128 x 64, 8 warps, 2 stages,
at most 128 registers: two programs an SM), the same L2-grouped launch order (``_program_tile``) and
the same folded scale. What differs is the program's start. ``_flash_fwd_tma`` builds its Q, K, V and
O descriptors with ``tl.make_tensor_descriptor``: each is 128 bytes written to the per-program global
scratch (``tensormap.replace`` steps) and a ``fence.proxy.tensormap`` before the first copy that
reads it, so a program's Q copy and first K copy wait on a global write, a fence and a descriptor
fetch before any wgmma; 4,096 programs a call, ~15.5 waves of two programs an SM. Here the host makes
the four descriptors once a call (``triton.tools.tensor_descriptor.TensorDescriptor``, as
``aisp.kits.sparse_flash``'s ``host=True`` does: 7.5-8.3% faster on an H200 for that kit's programs of
~17-19 key tiles), Triton's launcher passes them as ``__grid_constant__`` parameters, and the first
copies go out as soon as the program's tile is known. No global scratch either, so no allocator is set.
The Triton interpreter runs the same code on a CPU (fp32; bf16 through descriptors comes out garbled
there, as for the other descriptor kernels).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from ch18_attention import check_inputs
from ch18_attention_ahead import CONFIGS, _key_tiles_ahead
from ch18_attention_tma import _program_tile, head_group

from aisp.kits.sparse_flash import host_descriptors

TILES = (CONFIGS[0].kwargs["BLOCK_M"], CONFIGS[0].kwargs["BLOCK_N"])
"""``_ahead``'s tiles (128 x 64): the host descriptors' block shapes are fixed before the launch, so
there is no autotune, the one config ``_ahead`` has anyway."""
LAUNCH = {"num_warps": CONFIGS[0].num_warps, "num_stages": CONFIGS[0].num_stages, "maxnreg": CONFIGS[0].maxnreg}
"""``_ahead``'s launch settings on a GPU (8 warps, 2 stages, 128 registers)."""


@triton.jit
def _flash_fwd_host(q_desc, k_desc, v_desc, o_desc, n_heads, seq, qk_scale, CAUSAL: tl.constexpr,
                    HEAD_GROUP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """``_flash_fwd_tma`` with ``_key_tiles_ahead`` (``ONE_LOOP``) over host-made descriptors: Q and O
    in BLOCK_M x D tiles, K and V in BLOCK_N x D, all over the (n_heads * seq, D) rows."""
    head, start_m = _program_tile(n_heads, seq // BLOCK_M, HEAD_GROUP)
    head_row = head * seq
    q_row = head_row + start_m * BLOCK_M
    q = q_desc.load([q_row, 0])
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    end = (start_m + 1) * BLOCK_M if CAUSAL else seq
    acc, m_i, l_i = _key_tiles_ahead(tl.zeros(q.shape, tl.float32), m_i, tl.zeros((BLOCK_M,), tl.float32), q, k_desc,
                                     v_desc, head_row, offs_m, 0, end, qk_scale, BLOCK_N, CAUSAL)
    o_desc.store([q_row, 0], (acc / l_i[:, None]).to(q.dtype))


def flash_attention_hostdesc(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True,
                             blocks: tuple[int, int] | None = None, group: int | None = None) -> torch.Tensor:
    """``ch18_attention_ahead.flash_attention_ahead`` (same arguments, same result) over descriptors the
    host makes. ``blocks`` None: ``TILES`` on a GPU, (32, 16) elsewhere."""
    batch, heads, seq, dim = q.shape
    qk_scale = check_inputs("flash_attention_hostdesc", q, k, v)
    group = head_group(q) if group is None else group
    if group < 1 or (dim * q.element_size()) % 16 or any(t.data_ptr() % 16 for t in (q, k, v)):
        raise ValueError(f"flash_attention_hostdesc: group {group}, rows of {dim * q.element_size()} bytes: TMA "
                         "needs rows and bases aligned to 16 bytes")
    bm, bn = blocks or (TILES if q.is_cuda else (32, 16))
    if seq % bm or bm % bn:
        raise ValueError(f"flash_attention_hostdesc: blocks {bm}, {bn} do not tile seq {seq}")
    out = torch.empty_like(q)
    n_heads = batch * heads
    _flash_fwd_host[(n_heads * (seq // bm),)](*host_descriptors(q, k, v, out, bm, bn), n_heads, seq, qk_scale,
                                              CAUSAL=causal, HEAD_GROUP=group, BLOCK_M=bm, BLOCK_N=bn,
                                              **(LAUNCH if q.is_cuda else {}))
    return out
