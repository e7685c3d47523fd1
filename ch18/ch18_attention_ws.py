"""The TMA flash attention kernel with its key loop warp-specialized by Triton: a producer warpgroup
issues the K/V copies, two consumer warpgroups of 64 query rows each do the wgmma and the softmax
(FlashAttention-3's layout, made by the compiler).

Same kernel as ``ch18_attention_tma`` (``_flash_fwd_tma``: descriptors, L2-grouped launch order, the
scale folded into exp2), another key loop: ``tl.range(..., warp_specialize=True)``. On sm_90 Triton
3.6 honours it only at ``num_warps=4`` (its Hopper pass, ``nvgpu-warp-specialization``, splits the
loop into a TMA partition and ``num_warps`` x 2 consumer warps; at 8 warps the flag changes nothing
in the PTX): the kernel then runs 12 warps, 384 threads as cuDNN's and FlashAttention-3's do, the
BLOCK_M = 128 rows split into two 64-row halves, ``setmaxnreg`` giving the producer 40 registers
and the consumers 232, and mbarriers between them in place of ``_tma``'s block-wide barrier after
each copy (``_tma``'s top stall, barrier 3.65 per instruction against cuDNN's 1.61). The consumers'
wgmma and softmax still alternate inside each warpgroup (no ping-pong order between the two groups:
Triton's Hopper ping-pong pass is AMD's); the warp schedulers interleave the two groups.

The same pass fails on a kernel with two loops (an MLIR dominance assertion while it partitions the
causal kernel's off-diagonal and diagonal loops, whether the second is warp-specialized or not), and
gives up silently (4 plain warps, 255 registers and a stack frame) when the loop body branches per
tile. So this loop walks all keys in one call (``KeyLoop.one_loop``), the diagonal block included,
and a causal kernel selects the mask on every tile: a compare and a select per score that ``_tma``
spends on the diagonal block only. Also read in its sm_90 code: each consumer waits for its own
wgmma (``wgmma.wait_group 0``) before the softmax that reads it.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from ch18_attention_tma import KeyLoop, _flash_fwd_tma, _pv, _softmax, launch

CONFIGS = [triton.Config({"BLOCK_M": 128, "BLOCK_N": bn}, num_warps=4, num_stages=2) for bn in (128, 64)]
"""Hopper, head_dim 128, bf16; two candidates (each compile costs seconds of the chapter's budget).
``num_warps=4`` is a consumer warpgroup's size; Triton adds a second consumer group and the producer
(12 warps, one program an SM). (128 keys): FlashAttention-3's tile for head_dim 128, the biggest
wgmma per barrier, 197 KB of shared memory (a third K/V pair would pass the 227 KB a block may
have). (64 keys): half the registers for S and P, more barrier round trips per key. Not 3 stages at
64 keys: on the H200 (2026-11-29 sweep) that config returned NaN in some rows, while the
interpreter and the sm_90 compile checks passed. Swept at the pair's shape (causal, 4 x 32 heads of
4,096 x 128): 128 keys 1.178 ms, 64 keys 1.31-1.33 ms. tests/test_ch18_triton.py compiles each for
sm_90: wgmma, TMA, no spills, 12 warps, the setmaxnreg split."""


@triton.jit
def _key_tiles_ws(acc, m_i, l_i, q, k_desc, v_desc, head_row, offs_m, lo, hi, qk_scale, BLOCK_N: tl.constexpr,
                  DIAGONAL: tl.constexpr):
    """``_key_tiles`` as one warp-specialized loop over the keys [lo, hi); with ``DIAGONAL`` (a causal
    kernel's single call, the diagonal block included) every tile is masked, key > query."""
    for start in tl.range(lo, hi, BLOCK_N, warp_specialize=True):
        s = tl.dot(q, k_desc.load([head_row + start, 0]).T)
        p, alpha, m_i, l_i = _softmax(m_i, l_i, s, offs_m, start, qk_scale, BLOCK_N, DIAGONAL)
        acc = _pv(acc, p, alpha, v_desc, head_row + start)
    return acc, m_i, l_i


_flash_ws_tuned = triton.autotune(CONFIGS, key=["seq", "D", "CAUSAL", "HEAD_GROUP"])(_flash_fwd_tma)
WS = KeyLoop("flash_attention_ws", _key_tiles_ws, _flash_ws_tuned, one_loop=True)


def flash_attention_ws(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True,
                       blocks: tuple[int, int] | None = None, group: int | None = None) -> torch.Tensor:
    """``ch18_attention_tma.flash_attention_tma`` (same arguments, same result) with the warp-specialized key loop."""
    return launch(WS, q, k, v, causal, blocks, group)
