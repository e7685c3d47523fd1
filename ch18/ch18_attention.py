"""A FlashAttention-2-style forward kernel in Triton (``flash_attention_triton``'s optimized variant).

Layout (batch, heads, seq, head_dim), contiguous. Each program owns one head and BLOCK_M queries;
it keeps their output tile (fp32), running max and running sum on chip and walks the keys BLOCK_N
at a time: S = Q K^T on the tensor cores (fp32), online softmax in base 2 (the 1/sqrt(d) scale and
log2(e) folded into one multiply), rescale the accumulator by exp2(m_old - m_new), then
acc += P V with P rounded to the inputs' dtype. Nothing of size seq x seq ever reaches memory:
per head the kernel reads Q, K, V once per query block and writes O once.

Causal: a query block needs only the key blocks at or before it. The blocks strictly before the
diagonal run without a mask; only the BLOCK_M keys of the diagonal block are masked (second call
of the same loop, ``DIAGONAL``). Query blocks are launched longest first (the grid's fastest axis
is the head, the slow one walks query blocks from the last), so the short blocks fill the tail.

On a GPU the block sizes, warps and pipeline depth come from a small autotune set for Hopper
(``CONFIGS``: 2 configurations, compiled and timed once per shape, ~5-10 s); elsewhere (the
Triton interpreter on a CPU) from ``blocks``.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

CONFIGS = [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=s)
           for bm, bn, w, s in ((128, 64, 8, 3), (128, 128, 8, 3))]
"""Hopper candidates for head_dim 128 in bf16: 128-row query tiles over 8 warps (two warpgroups
issuing wgmma), 64- or 128-key tiles, 3 stages of K/V loads in flight. Two only: each candidate is a
compile (~2-4 s) in the chapter's 3-minute budget; the 4-warp and 64-row tiles were dropped (one
warpgroup per 128 rows spills the fp32 accumulator; 64-row tiles halve the wgmma work per K/V load)."""


@triton.jit
def _key_blocks(acc, m_i, l_i, q, k_base, v_base, offs_m, lo, hi, qk_scale, D: tl.constexpr,
                BLOCK_N: tl.constexpr, DIAGONAL: tl.constexpr):
    """Online softmax over keys [lo, hi); masks key > query only where ``DIAGONAL``."""
    offs_n, offs_d = tl.arange(0, BLOCK_N), tl.arange(0, D)
    for start in range(lo, hi, BLOCK_N):
        cols = start + offs_n
        k = tl.load(k_base + cols[:, None] * D + offs_d[None, :])
        s = tl.dot(q, tl.trans(k)) * qk_scale
        if DIAGONAL:
            s = tl.where(offs_m[:, None] >= cols[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + cols[:, None] * D + offs_d[None, :])
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    return acc, m_i, l_i


@triton.jit
def _flash_fwd(q_ptr, k_ptr, v_ptr, o_ptr, seq, qk_scale, D: tl.constexpr, CAUSAL: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Program (head, query block from the last): O = softmax(Q K^T * scale) V for BLOCK_M queries."""
    bh = tl.program_id(0)
    start_m = tl.num_programs(1) - 1 - tl.program_id(1)
    base = bh.to(tl.int64) * seq * D
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    q = tl.load(q_ptr + base + offs_m[:, None] * D + offs_d[None, :])
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, D), tl.float32)
    hi = start_m * BLOCK_M if CAUSAL else seq
    acc, m_i, l_i = _key_blocks(acc, m_i, l_i, q, k_ptr + base, v_ptr + base, offs_m, 0, hi, qk_scale, D, BLOCK_N,
                                False)
    if CAUSAL:
        acc, m_i, l_i = _key_blocks(acc, m_i, l_i, q, k_ptr + base, v_ptr + base, offs_m, hi, hi + BLOCK_M,
                                    qk_scale, D, BLOCK_N, True)
    out = acc / l_i[:, None]
    tl.store(o_ptr + base + offs_m[:, None] * D + offs_d[None, :], out.to(o_ptr.dtype.element_ty))


def check_inputs(caller: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> float:
    """Raises ValueError unless q, k, v are contiguous (batch, heads, seq, head_dim) of one shape; returns
    the softmax scale in base 2, log2(e) / sqrt(head_dim), that the kernels fold into one multiply."""
    if not (q.is_contiguous() and k.is_contiguous() and v.is_contiguous()) or not q.shape == k.shape == v.shape:
        raise ValueError(f"{caller}: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}: contiguous and "
                         "equal shapes")
    return math.log2(math.e) / math.sqrt(q.shape[-1])


_flash_tuned = triton.autotune(CONFIGS, key=["seq", "D", "CAUSAL"])(_flash_fwd)


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True,
                    blocks: tuple[int, int] | None = None) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) [causal]) v for contiguous q, k, v (batch, heads, seq, head_dim).
    ``blocks`` (BLOCK_M, BLOCK_N) fixes the tiles (BLOCK_M a multiple of BLOCK_N, both dividing
    seq); None autotunes on a GPU (seq a multiple of 128) and takes (32, 16) elsewhere."""
    batch, heads, seq, dim = q.shape
    qk_scale = check_inputs("flash_attention", q, k, v)
    out = torch.empty_like(q)
    if blocks is None and q.is_cuda:
        if seq % 128:
            raise ValueError(f"flash_attention: seq {seq} is not a multiple of 128")
        grid = lambda meta: (batch * heads, seq // meta["BLOCK_M"])  # noqa: E731
        _flash_tuned[grid](q, k, v, out, seq, qk_scale, D=dim, CAUSAL=causal)
        return out
    bm, bn = blocks or (32, 16)
    if seq % bm or bm % bn:
        raise ValueError(f"flash_attention: blocks {bm}, {bn} do not tile seq {seq}")
    _flash_fwd[(batch * heads, seq // bm)](q, k, v, out, seq, qk_scale, D=dim, CAUSAL=causal, BLOCK_M=bm,
                                           BLOCK_N=bn)
    return out
