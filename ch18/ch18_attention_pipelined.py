"""The TMA flash attention kernel with its key loop software-pipelined inside the warpgroup (FlashAttention-3's
intra-warpgroup overlap): the next key tile's Q K^T is issued before this tile's softmax.

Same kernel as ``ch18_attention_tma`` (descriptors, L2-grouped launch order, the scale folded into
exp2; ``_flash_fwd_tma`` itself, with another key loop). There, each key tile runs S = Q K^T
(wgmma), then the softmax (max, exp2, sum: SFU and FMA work), then acc += P V (wgmma), and the
tensor cores idle while the softmax runs unless a second program on the SM fills them. Here the
loop carries the next tile's scores: iteration j issues S_{j+1} = Q K_{j+1}^T, then does tile j's
softmax and P V while that product is in flight, and hands S_{j+1} to iteration j + 1. The first
product is issued before the loop and the last tile's softmax and P V are peeled after it, so no
product is wasted; a range of one tile runs only the peeled step. The cost: a second S tile lives
in registers (``CONFIGS`` says what that allows), and the pipeline drains at the end of the
unmasked range and again at the causal diagonal (two to three tiles a program in ~33 at 4,096
tokens).

Whether the overlap is real is Triton's choice: ``tl.dot`` on sm_90 is an async wgmma followed by a
``wgmma.wait_group`` wherever Triton needs its result. tests/test_ch18_triton.py reads the PTX
(README section 1 says what it shows).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from ch18_attention_tma import KeyLoop, _flash_fwd_tma, _softmax_pv, launch

CONFIGS = [triton.Config({"BLOCK_M": 128, "BLOCK_N": bn}, num_warps=8, num_stages=2, maxnreg=reg)
           for bn, reg in ((64, None), (64, 168), (128, None))]
"""Hopper, head_dim 128, bf16, 128 queries over 8 warps as in ``_tma``; what changes is the second
live S tile. At 128 x 64 an S tile is 32 fp32 registers a thread (8,192 scores over 256 threads),
so S and S_next take 64, beside the 64 of the 128 x 128 fp32 accumulator, P in bf16 (16) and the
row statistics: ~170, past ``_tma``'s 128-register cap that let two programs share an SM (that
overlap is what this kernel does inside one program instead). (64, uncapped) and (64, capped at
168): one program an SM, the cap only keeping ptxas from spending more. (128, uncapped): 64 + 64
registers of S tiles, the biggest wgmma per barrier, if it compiles without spills.
tests/test_ch18_triton.py compiles each for sm_90: wgmma, TMA, no spills, the cap met."""


@triton.jit
def _key_tiles_pipelined(acc, m_i, l_i, q, k_desc, v_desc, head_row, offs_m, lo, hi, qk_scale,
                         BLOCK_N: tl.constexpr, DIAGONAL: tl.constexpr):
    """``_key_tiles`` with the next tile's Q K^T issued before this tile's softmax and P V (the scores
    loop-carried), the first product before the loop and the last tile's step peeled after it."""
    if lo < hi:
        s = tl.dot(q, k_desc.load([head_row + lo, 0]).T)
        for start in tl.range(lo, hi - BLOCK_N, BLOCK_N):
            s_next = tl.dot(q, k_desc.load([head_row + start + BLOCK_N, 0]).T)
            acc, m_i, l_i = _softmax_pv(acc, m_i, l_i, s, v_desc, head_row, offs_m, start, qk_scale, BLOCK_N,
                                        DIAGONAL)
            s = s_next
        acc, m_i, l_i = _softmax_pv(acc, m_i, l_i, s, v_desc, head_row, offs_m, hi - BLOCK_N, qk_scale, BLOCK_N,
                                    DIAGONAL)
    return acc, m_i, l_i


_flash_pipelined_tuned = triton.autotune(CONFIGS, key=["seq", "D", "CAUSAL", "HEAD_GROUP"])(_flash_fwd_tma)
PIPELINED = KeyLoop("flash_attention_pipelined", _key_tiles_pipelined, _flash_pipelined_tuned)


def flash_attention_pipelined(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True,
                              blocks: tuple[int, int] | None = None, group: int | None = None) -> torch.Tensor:
    """``ch18_attention_tma.flash_attention_tma`` (same arguments, same result) with the pipelined key loop."""
    return launch(PIPELINED, q, k, v, causal, blocks, group)
