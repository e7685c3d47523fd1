"""Causal ALiBi attention for head dim 64 as our own Triton kernel (``flex_score_mod``'s ``_triton`` variant).

The FlexAttention kernel it replaces (profiled on an H200: 255 registers, one 4-warp program of 128
queries a scheduler pair, tensor pipe 28%, issue 46%) spends its issue slots on the score_mod as
Inductor writes it (an integer subtraction, a convert, a multiply and an add per score, beside the
scale) and has too few warps to overlap the softmax with the products. Here:

- The loop is ch18 ``_ahead``'s (``aisp.kits.sparse_flash``'s band walk without lists): Q, K, V, O
  by device-side TMA descriptors over the (batch*heads*seq, 64) rows, 128 queries over 8 warps (two
  warpgroups of 64 rows), each P V wgmma waited for in its iteration (``settled``), each key tile's
  Q K^T issued at the end of the previous tile; heads in L2-sized groups, a group's query blocks
  longest first, its heads fastest. Only the diagonal block's key tiles are masked.
- The score_mod ``score + m_h (kv - q)`` in base 2, two routes (``MMA_BIAS``, both autotuned):
  in the softmax, y = s c + b_j with c = log2(e) / sqrt(d) and b_j = m_h log2(e) (kv_j - q0), q0 the
  program's first query: the dropped term -m_h log2(e) (q - q0) is one number per row, and softmax
  does not change when a row's scores all move by one number (only fp32 rounding differs; the terms
  stay small where P is not 0); b_j costs one value per column a thread holds. Or in the tensor
  cores: one more 16-wide wgmma k-step adds m_h sqrt(d) kv_j to Q K^T from ``bias_table`` (its three
  bf16 parts, times a ones tile), so the softmax is plain flash's, P = exp2(S c - m), one FFMA a
  score; the row term cancels in the same way.

Rows are never empty (each query sees key 0 and itself), so there is no -inf guard. Shapes: head dim
a multiple of 16, seq a multiple of 128 (``alibi_flash_attention`` raises ValueError otherwise).
The Triton interpreter runs the same code on a CPU (``settled`` is the identity there).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from aisp.kits.flash_parts import pv_step as _pv
from aisp.kits.flash_parts import row_tiles as _rows
from aisp.kits.flash_parts import settled as _settled
from aisp.kits.sparse_flash import _head_group_entry, head_group
from aisp.kits.tma import use_torch_scratch

LOG2E = 1.4426950408889634
BIAS_COLS = 16
"""Columns of ``bias_table`` (one bf16 wgmma k-step; the bias uses 3)."""
_COLS: tl.constexpr = tl.constexpr(BIAS_COLS)

CONFIGS = [triton.Config({"BLOCK_M": 128, "BLOCK_N": bn, "MMA_BIAS": mma}, num_warps=8, num_stages=s, maxnreg=reg)
           for bn, mma, s, reg in ((64, False, 2, 128), (64, True, 2, 128), (64, True, 3, 128), (128, True, 2, None))]
"""Hopper, head dim 64, bf16, 128 queries over two warpgroups (compiled for sm_90a without a GPU,
tests/test_ch14_triton.py: no spills, no ptxas advisory). (64, bias in the softmax, 2 stages, 128
registers): ch18 ``_ahead``'s config, two programs an SM, 365 SASS instructions a key tile. (64, bias
by wgmma, 2 and 3 stages, 128): 105 registers, 306 instructions a tile. (128, bias by wgmma, 2 stages,
uncapped): 140 registers (one program an SM; capped at 128 it spills), 457 instructions a 128-key
tile, half the accumulator rescales a score. The 128-key tile with the bias in the softmax took 209
registers and was left out. The autotuner times the four at the first call."""

CPU_CONFIG = triton.Config({"BLOCK_M": 32, "BLOCK_N": 16, "MMA_BIAS": True})
"""The interpreter's tiles (small, so that a short sequence walks several key tiles)."""


@triton.jit
def _scores(q, ones, k_desc, b_desc, head_row, bias_row, start, MMA_BIAS: tl.constexpr):
    """S = Q K^T of the key tile at ``start``; with MMA_BIAS plus the table's ALiBi column bias, one more
    k-step of the same wgmma chain (``ones`` picks the bias's three bf16 parts)."""
    s = tl.dot(q, k_desc.load([head_row + start, 0]).T)
    if MMA_BIAS:
        s = tl.dot(ones, b_desc.load([bias_row + start, 0]).T, s)
    return s


@triton.jit
def _softmax(m_i, l_i, s, offs_m, start, q0, qk_scale, slope, BLOCK_N: tl.constexpr, MASK: tl.constexpr,
             MMA_BIAS: tl.constexpr):
    """Online softmax (base 2) of the key tile at ``start`` given its scores s: y = s c + b_j, b_j =
    slope (key_j - q0), or y = s c where s holds the bias (MMA_BIAS); masks key > query where MASK.
    Returns P, alpha, m_new, l_new."""
    keys = start + tl.arange(0, BLOCK_N)
    if MMA_BIAS:
        y = s
    else:
        y = s * qk_scale + ((keys - q0).to(tl.float32) * slope)[None, :]
    if MASK:
        y = tl.where(offs_m[:, None] >= keys[None, :], y, float("-inf"))
    if MMA_BIAS:  # scale folded into the exponent's FFMA
        m_new = tl.maximum(m_i, tl.max(y, 1) * qk_scale)
        p = tl.exp2(y * qk_scale - m_new[:, None])
    else:
        m_new = tl.maximum(m_i, tl.max(y, 1))
        p = tl.exp2(y - m_new[:, None])
    alpha = tl.exp2(m_i - m_new)
    return p, alpha, m_new, l_i * alpha + tl.sum(p, 1)


@triton.jit
def _tile_then_next(acc, m_i, l_i, s, q, ones, k_desc, v_desc, b_desc, head_row, bias_row, offs_m, start, q0,
                    qk_scale, slope, BLOCK_N: tl.constexpr, MASK: tl.constexpr, MMA_BIAS: tl.constexpr):
    """Tile ``start``'s softmax (its scores ``s``) and P V, then the next tile's scores."""
    p, alpha, m_i, l_i = _softmax(m_i, l_i, s, offs_m, start, q0, qk_scale, slope, BLOCK_N, MASK, MMA_BIAS)
    acc = _settled(_pv(acc, p, alpha, v_desc, head_row + start))
    s = _scores(q, ones, k_desc, b_desc, head_row, bias_row, start + BLOCK_N, MMA_BIAS)
    return acc, m_i, l_i, s


@triton.jit
def _alibi_flash_fwd(q_ptr, k_ptr, v_ptr, o_ptr, slopes_ptr, bias_ptr, n_heads, heads, seq, qk_scale,
                     D: tl.constexpr, HEAD_GROUP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     MMA_BIAS: tl.constexpr):
    """One program: BLOCK_M queries of one (batch, head) over keys 0 .. its diagonal, causal ALiBi."""
    n_blocks = seq // BLOCK_M
    head, i = _head_group_entry(tl.program_id(0), n_heads, n_blocks, HEAD_GROUP)
    block = n_blocks - 1 - i
    slope = tl.load(slopes_ptr + head % heads) * 1.4426950408889634
    rows = n_heads * seq
    head_row = head * seq
    bias_row = head % heads * seq
    q0 = block * BLOCK_M
    k_desc, v_desc = _rows(k_ptr, rows, D, BLOCK_N), _rows(v_ptr, rows, D, BLOCK_N)
    if MMA_BIAS:
        b_desc = _rows(bias_ptr, heads * seq, _COLS, BLOCK_N)
    else:
        b_desc = k_desc
    q = _rows(q_ptr, rows, D, BLOCK_M).load([head_row + q0, 0])
    ones = tl.broadcast_to((tl.arange(0, _COLS) < 3).to(q.dtype)[None, :], (BLOCK_M, _COLS))
    offs_m = q0 + tl.arange(0, BLOCK_M)
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, D), tl.float32)
    last = q0 + BLOCK_M - BLOCK_N
    s = _scores(q, ones, k_desc, b_desc, head_row, bias_row, 0, MMA_BIAS)
    for start in tl.range(0, q0, BLOCK_N):
        acc, m_i, l_i, s = _tile_then_next(acc, m_i, l_i, s, q, ones, k_desc, v_desc, b_desc, head_row, bias_row,
                                           offs_m, start, q0, qk_scale, slope, BLOCK_N, False, MMA_BIAS)
    for start in tl.range(q0, last, BLOCK_N):
        acc, m_i, l_i, s = _tile_then_next(acc, m_i, l_i, s, q, ones, k_desc, v_desc, b_desc, head_row, bias_row,
                                           offs_m, start, q0, qk_scale, slope, BLOCK_N, True, MMA_BIAS)
    p, alpha, m_i, l_i = _softmax(m_i, l_i, s, offs_m, last, q0, qk_scale, slope, BLOCK_N, True, MMA_BIAS)
    acc = _pv(acc, p, alpha, v_desc, head_row + last)
    _rows(o_ptr, rows, D, BLOCK_M).store([head_row + q0, 0], (acc / l_i[:, None]).to(o_ptr.dtype.element_ty))


_alibi_flash_tuned = triton.autotune(CONFIGS, key=["seq", "D", "HEAD_GROUP"])(_alibi_flash_fwd)


def bias_table(slopes: torch.Tensor, seq: int, head_dim: int, dtype: torch.dtype) -> torch.Tensor:
    """(heads * seq, BIAS_COLS) in ``dtype``: row h * seq + j holds m_h sqrt(head_dim) j (the ALiBi bias in
    Q K^T's units, key j against query 0) as three parts hi + mid + lo in columns 0-2 (each part the
    rounding of what the earlier ones left: bf16 parts carry ~24 bits, as fp32), zeros after. Depends
    on the slopes and the shape only (built once, like the baseline's bias tensor)."""
    x = slopes.double()[:, None] * math.sqrt(head_dim) * torch.arange(seq, device=slopes.device, dtype=torch.float64)
    parts = []
    for _ in range(3):
        parts.append(x.to(dtype))
        x = x - parts[-1].double()
    table = torch.zeros(slopes.shape[0], seq, BIAS_COLS, device=slopes.device, dtype=dtype)
    table[..., :3] = torch.stack(parts, -1)
    return table.view(-1, BIAS_COLS)


def alibi_flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, slopes: torch.Tensor,
                          table: torch.Tensor | None = None, config: triton.Config | None = None) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) + slopes[h] (kv - q), causal) v for contiguous q, k, v (batch, heads, seq,
    head_dim) of one shape, ``slopes`` fp32 (heads,); ``table``: ``bias_table`` for these (None: made
    here). ``config`` fixes the launch (BLOCK_M a multiple of BLOCK_N, dividing seq); None autotunes
    ``CONFIGS`` on a GPU and takes ``CPU_CONFIG`` elsewhere."""
    batch, heads, seq, dim = q.shape
    if not (q.is_contiguous() and k.is_contiguous() and v.is_contiguous()) or not q.shape == k.shape == v.shape:
        raise ValueError(f"alibi_flash_attention: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}: "
                         "contiguous and equal shapes")
    if slopes.shape != (heads,) or slopes.dtype != torch.float32 or slopes.device != q.device:
        raise ValueError(f"alibi_flash_attention: slopes {tuple(slopes.shape)} {slopes.dtype}: fp32 ({heads},)")
    table = bias_table(slopes, seq, dim, q.dtype) if table is None else table
    if table.shape != (heads * seq, BIAS_COLS) or table.dtype != q.dtype:
        raise ValueError(f"alibi_flash_attention: table {tuple(table.shape)} {table.dtype}: bias_table's")
    tuned = config is None and q.is_cuda
    config = config or CPU_CONFIG
    bm, bn = (128, 128) if tuned else (config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"])
    if dim % 16 or any(t.data_ptr() % 16 for t in (q, k, v, table)) or seq % bm or bm % bn:
        raise ValueError(f"alibi_flash_attention: head dim {dim}, seq {seq}, blocks {bm} x {bn}: head dim a "
                         "multiple of 16, 16-byte aligned bases, tiles dividing seq")
    out = torch.empty_like(q)
    n_heads = batch * heads
    args = (q, k, v, out, slopes, table, n_heads, heads, seq, LOG2E / math.sqrt(dim))
    if q.is_cuda:
        use_torch_scratch()
    if tuned:
        grid = lambda meta: (n_heads * (seq // meta["BLOCK_M"]),)  # noqa: E731
        _alibi_flash_tuned[grid](*args, D=dim, HEAD_GROUP=head_group(q))
        return out
    launch = {k: v for k, v in config.all_kwargs().items() if v is not None and (q.is_cuda or k in config.kwargs)}
    _alibi_flash_fwd[(n_heads * (seq // bm),)](*args, D=dim, HEAD_GROUP=head_group(q), **launch)
    return out
