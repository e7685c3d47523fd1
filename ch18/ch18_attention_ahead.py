"""The pvwait flash attention kernel with each key tile's Q K^T issued at the end of the previous
tile, so that the K tile's TMA copy has a softmax and a P V product to hide behind.

Same kernel as ``ch18_attention_pvwait`` (``_flash_fwd_tma``: descriptors, L2-grouped launch order,
the scale folded into exp2; each product waited for in its iteration, ``_settled``), another key
loop. Why: Triton 3.6's pipeliner (``tl.range``, 2 stages) issues the TMA copies for tile j+1 at the
end of iteration j, after its P V product, and iteration j+1 starts by waiting for K_{j+1}: in
``_pvwait`` (and ``_tma``) that copy's whole latency (an L2 hit, several hundred cycles) is exposed
once a key tile in each program, with only the SM's other program to fill the tensor cores. 3 stages
would hide it but take 129 KB of shared memory at these tiles, one program an SM (3 and 4 stages
lost in the `_tma` sweep of 2026-11-28, README section 1).

Here iteration j runs tile j's softmax on S_j (loop-carried), acc += P_j V_j, then S_{j+1} = Q K_{j+1}^T.
The pipeliner still issues its copies at the end of the iteration (V_{j+1}, K_{j+2}), but now K_{j+2}
is first waited for after tile j+1's softmax and P V, and V_{j+1} after tile j+1's softmax. And a
program's two products now run back to back (P_j V_j, then Q K_{j+1}^T) between two softmaxes:
one tensor phase and one SFU/FMA phase a tile, which the SM's two programs can alternate.
All keys go through one call (``KeyLoop.one_loop``): Q K^T of the first tile before the loops,
the off-diagonal tiles, the causal diagonal block's tiles but its last with the mask, the last
tile's softmax and P V after them, so the chain runs across the diagonal boundary too and no
product is wasted. Compiled for sm_90a without a GPU (128 x 64, 8 warps, 2 stages, 128 registers):
128 registers, no spills, no ptxas advisory, 325 SASS instructions and 3 ``bar.sync`` a key tile
(``_pvwait``: 329 and 3), 96 KB of shared memory: two programs an SM.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from ch18_attention_pvwait import _settled
from ch18_attention_tma import KeyLoop, _flash_fwd_tma, _pv, _softmax, launch

CONFIGS = [triton.Config({"BLOCK_M": 128, "BLOCK_N": 64}, num_warps=8, num_stages=2, maxnreg=128)]
"""``_pvwait``'s config (two programs an SM), the one config: the first call compiles once and times
nothing. ``kernel_sweep.py flash`` times this loop and ``_pvwait``'s at other tiles, stages and warps."""


@triton.jit
def _tile_then_next(acc, m_i, l_i, s, q, k_desc, v_desc, head_row, offs_m, start, qk_scale, BLOCK_N: tl.constexpr,
                    MASK: tl.constexpr):
    """Tile ``start``'s softmax (its scores ``s``) and P V, then the next tile's scores."""
    p, alpha, m_i, l_i = _softmax(m_i, l_i, s, offs_m, start, qk_scale, BLOCK_N, MASK)
    acc = _settled(_pv(acc, p, alpha, v_desc, head_row + start))
    s = tl.dot(q, k_desc.load([head_row + start + BLOCK_N, 0]).T)
    return acc, m_i, l_i, s


@triton.jit
def _key_tiles_ahead(acc, m_i, l_i, q, k_desc, v_desc, head_row, offs_m, lo, hi, qk_scale, BLOCK_N: tl.constexpr,
                     DIAGONAL: tl.constexpr):
    """All keys [lo, hi) in one chain (``KeyLoop.one_loop``), each tile's Q K^T issued at the end of the
    previous tile; with ``DIAGONAL`` the last BLOCK_M keys (the causal diagonal block) are masked."""
    diag = hi - offs_m.shape[0] if DIAGONAL else hi - BLOCK_N
    s = tl.dot(q, k_desc.load([head_row + lo, 0]).T)
    for start in tl.range(lo, diag, BLOCK_N):
        acc, m_i, l_i, s = _tile_then_next(acc, m_i, l_i, s, q, k_desc, v_desc, head_row, offs_m, start, qk_scale,
                                           BLOCK_N, False)
    for start in tl.range(diag, hi - BLOCK_N, BLOCK_N):
        acc, m_i, l_i, s = _tile_then_next(acc, m_i, l_i, s, q, k_desc, v_desc, head_row, offs_m, start, qk_scale,
                                           BLOCK_N, True)
    p, alpha, m_i, l_i = _softmax(m_i, l_i, s, offs_m, hi - BLOCK_N, qk_scale, BLOCK_N, DIAGONAL)
    return _pv(acc, p, alpha, v_desc, head_row + hi - BLOCK_N), m_i, l_i


_flash_ahead_tuned = triton.autotune(CONFIGS, key=["seq", "D", "CAUSAL", "HEAD_GROUP"])(_flash_fwd_tma)
AHEAD = KeyLoop("flash_attention_ahead", _key_tiles_ahead, _flash_ahead_tuned, one_loop=True)


def flash_attention_ahead(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True,
                          blocks: tuple[int, int] | None = None, group: int | None = None) -> torch.Tensor:
    """``ch18_attention_tma.flash_attention_tma`` (same arguments, same result) with each tile's Q K^T
    issued one tile ahead."""
    return launch(AHEAD, q, k, v, causal, blocks, group)
