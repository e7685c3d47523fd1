"""The TMA flash attention kernel with each tile's P V product waited for inside its iteration, so
that ptxas keeps the wgmma asynchronous at 128 registers (two programs an SM) instead of
serializing every one of them.

Same kernel as ``ch18_attention_tma`` (``_flash_fwd_tma``: descriptors, L2-grouped launch order,
the scale folded into exp2) and the same key loop, plus one no-op. Why: ``_tma``'s measured config
(128 x 64 tiles, 8 warps, capped at 128 registers so that two programs share an SM) gets ptxas's
advisory C7512, "wgmma.mma_async instructions are serialized due to insufficient register
resources": its SASS has one ``WARPGROUP.DEPBAR`` per HGMMA (12 a key tile instead of 2), each of a
product's k-steps waiting for the previous one. The registers it lacks are the in-flight ones:
Triton 3.6 leaves the P V product (acc, 64 fp32 registers a thread, and its A operand P, 16) in
flight across the loop's back edge, since the carried acc is next read after the next Q K^T's wait,
so while the next Q K^T runs, its S (32) is in flight too: 112 registers pinned by wgmma, and the
kernel's addresses, barriers, row max and sum do not fit in the other 16. Uncapped, the same code
takes 138 registers (one program an SM), which the autotuner rejected (2026-11-28).

The fix: read acc once right after the P V product, through an empty inline-asm statement whose
output is tied to its input (``_settled``: no instruction in the SASS). Triton then waits for the
product there (``wgmma.wait_group 0`` after its commit), nothing is in flight across the back edge,
and ptxas keeps each product's k-steps in one asynchronous group: 127 registers, no spills, no
C7512, 2 waits a key tile, 329 SASS instructions a key tile against ``_tma``'s 349 (compiled for
sm_90a without a GPU, tests/test_ch18_triton.py). What it gives up: the P V product no longer
overlaps the next tile's TMA issue and K wait inside one warpgroup; the other three warpgroups on
the SM (two programs) are what fills the tensor cores meanwhile, as in ``_tma``. The Triton
interpreter runs no inline asm, so there ``_settled`` is the identity.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from ch18_attention_tma import KeyLoop, _flash_fwd_tma, _pv, _softmax, launch

from aisp.kits.flash_parts import settled as _settled

CONFIGS = [triton.Config({"BLOCK_M": 128, "BLOCK_N": 64}, num_warps=8, num_stages=2, maxnreg=128)]
"""Hopper, head_dim 128, bf16: ``_tma``'s measured config (128 x 64, 2 stages, 96 KB of shared
memory, capped at 128 registers: two programs an SM), the one config, so the first call compiles
once and times nothing. 128-key tiles would need 64 registers for S beside acc's 64."""

@triton.jit
def _key_tiles_pvwait(acc, m_i, l_i, q, k_desc, v_desc, head_row, offs_m, lo, hi, qk_scale, BLOCK_N: tl.constexpr,
                      DIAGONAL: tl.constexpr):
    """``_key_tiles`` with the P V product waited for in its own iteration (``_settled``)."""
    for start in tl.range(lo, hi, BLOCK_N):
        s = tl.dot(q, k_desc.load([head_row + start, 0]).T)
        p, alpha, m_i, l_i = _softmax(m_i, l_i, s, offs_m, start, qk_scale, BLOCK_N, DIAGONAL)
        acc = _settled(_pv(acc, p, alpha, v_desc, head_row + start))
    return acc, m_i, l_i


_flash_pvwait_tuned = triton.autotune(CONFIGS, key=["seq", "D", "CAUSAL", "HEAD_GROUP"])(_flash_fwd_tma)
PVWAIT = KeyLoop("flash_attention_pvwait", _key_tiles_pvwait, _flash_pvwait_tuned)


def flash_attention_pvwait(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True,
                           blocks: tuple[int, int] | None = None, group: int | None = None) -> torch.Tensor:
    """``ch18_attention_tma.flash_attention_tma`` (same arguments, same result) with the P V product
    waited for in its iteration (no wgmma serialized at 128 registers)."""
    return launch(PVWAIT, q, k, v, causal, blocks, group)
