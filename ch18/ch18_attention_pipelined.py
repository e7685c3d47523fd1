"""The TMA flash attention kernel with its key loop software-pipelined inside the warpgroup (FlashAttention-3's
intra-warpgroup overlap): one tile's softmax runs while the previous tile's P V product is in flight.

Same kernel as ``ch18_attention_tma`` (``_flash_fwd_tma`` itself: descriptors, L2-grouped launch
order, the scale folded into exp2), another key loop. There, each key tile runs S = Q K^T (wgmma),
waits for it, does the softmax (max, exp2, sum: SFU and FMA work) and issues acc += P V, so the
tensor cores idle during the softmax unless another program on the SM fills them. Here iteration j
issues S_j = Q K_j^T, then acc += P_{j-1} V_{j-1} (P and alpha loop-carried), then computes tile
j's softmax while that P V product is in flight: FlashAttention-3's Algorithm 2, which issues
both products before its softmax. The first tile's softmax is peeled before the loop and the last
tile's P V after it, so no product is wasted; a range of one tile runs only the peeled steps.

The form first tried, S_{j+1} = Q K_{j+1}^T issued before tile j's softmax with S loop-carried, does
not overlap in Triton 3.6: its wgmma pass keeps a dot in flight across iterations only if the
carried result is used after a ``wait 0`` of the loop or by another dot as accumulator, so it puts
``wgmma.wait_group 0`` right after S_{j+1} and the ex2s wait for both products. In this order the
P V product's carried accumulator is next read after the S_j wait, so Triton leaves it in flight
across the softmax (README section 1 has what the PTX and SASS show; tests/test_ch18_triton.py
checks it).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from ch18_attention_tma import KeyLoop, _flash_fwd_tma, _pv, _softmax, launch

CONFIGS = [triton.Config({"BLOCK_M": 128, "BLOCK_N": 128}, num_warps=8, num_stages=2)]
"""Hopper, head_dim 128, bf16, 128 queries over 8 warps as in ``_tma``; one candidate. While
P_{j-1} V_{j-1} runs, a thread holds its accumulator share (128 x 128 fp32 over 256 threads: 64
registers) and the P operand that product reads (bf16: 32 at 128 keys) beside tile j's S (64) and
new P: ptxas gives 244 registers, so one program an SM and the overlap is inside it (``_tma``'s
128 x 64 tiles capped at 128 registers put two programs on an SM instead). 128-key tiles only: at
64 keys ptxas serializes every wgmma of this loop (advisory C7515: non-wgmma instructions write an
in-flight accumulator), which undoes the point, and a 128-register cap spills. 2 stages: 196 KB of
shared memory; a third K/V pair would take 262 KB, past the 227 KB a block may have.
tests/test_ch18_triton.py compiles it for sm_90: wgmma, TMA, no spills, no serialized wgmma, the
P V product in flight across the softmax."""


@triton.jit
def _key_tiles_pipelined(acc, m_i, l_i, q, k_desc, v_desc, head_row, offs_m, lo, hi, qk_scale,
                         BLOCK_N: tl.constexpr, DIAGONAL: tl.constexpr):
    """``_key_tiles`` reordered: S_j = Q K_j^T, then acc += P_{j-1} V_{j-1}, then tile j's softmax (which
    overlaps that product); tile lo's softmax before the loop, the last tile's P V after it."""
    if lo < hi:
        s = tl.dot(q, k_desc.load([head_row + lo, 0]).T)
        p, alpha, m_i, l_i = _softmax(m_i, l_i, s, offs_m, lo, qk_scale, BLOCK_N, DIAGONAL)
        for start in tl.range(lo + BLOCK_N, hi, BLOCK_N):
            s = tl.dot(q, k_desc.load([head_row + start, 0]).T)
            acc = _pv(acc, p, alpha, v_desc, head_row + start - BLOCK_N)
            p, alpha, m_i, l_i = _softmax(m_i, l_i, s, offs_m, start, qk_scale, BLOCK_N, DIAGONAL)
        acc = _pv(acc, p, alpha, v_desc, head_row + hi - BLOCK_N)
    return acc, m_i, l_i


_flash_pipelined_tuned = triton.autotune(CONFIGS, key=["seq", "D", "CAUSAL", "HEAD_GROUP"])(_flash_fwd_tma)
PIPELINED = KeyLoop("flash_attention_pipelined", _key_tiles_pipelined, _flash_pipelined_tuned)


def flash_attention_pipelined(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True,
                              blocks: tuple[int, int] | None = None, group: int | None = None) -> torch.Tensor:
    """``ch18_attention_tma.flash_attention_tma`` (same arguments, same result) with the pipelined key loop."""
    return launch(PIPELINED, q, k, v, causal, blocks, group)
