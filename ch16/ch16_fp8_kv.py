"""Split-K decode attention over an fp8 (e4m3) KV cache with one scale per K/V head (Triton).

Cache layout: the kit's per layer, (rows, kv_heads, context, head_dim); queries (rows, kv_heads,
groups, head_dim): the ``groups`` query heads that share a K/V head (GQA), as the kit folds them.
``quantize_heads`` stores K or V as e4m3 with scale = amax over the head / 448 (set when tokens
are written; static here). The attention kernel reads the e4m3 keys and values (1 byte each),
widens them to fp16 in registers and runs both products on the tensor cores; the K scale folds
into the query, the V scale into the final combine, so dequantization costs no pass over the
cache. Each program takes one (row, K/V head) and one of ``splits`` slices of the context
(flash-decoding: enough programs to keep every SM streaming), and writes its unnormalized output
with its running max and sum (the ``groups`` real query rows only); a second kernel merges the slices.

V's layout: row-major (the kit's) or in blocks of BLOCK_N tokens, each block dim-major
(``block_values``; vLLM's paged V layout). In P V the tensor cores take V with the keys as the
reduced dimension: row-major, consecutive keys sit D bytes apart in shared memory, and on sm_90
(no transposing ldmatrix for 8-bit values) the compiled kernel reads them one byte at a time, 64
``LDS.U8`` a thread per 64-key step; dim-major blocks are copied and read as K is (16-byte
asynchronous copies, ldmatrix).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

BLOCK_N = 64
"""Keys per inner step (64 x 128 e4m3 = 8 KB of K and of V)."""
G_PAD = 16
"""Query rows per program, padded: the tensor-core tile's minimum height."""


@triton.jit
def _attend(q_ptr, k_ptr, v_ptr, ks_ptr, o_ptr, ml_ptr, ctx, qk_scale, SPLIT_LEN: tl.constexpr,
            KV_HEADS: tl.constexpr, GROUPS: tl.constexpr, G_PAD: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr,
            V_BLOCKS: tl.constexpr):
    """Program (row * KV_HEADS + head, split): unnormalized softmax(q k^T) v over keys
    [split * SPLIT_LEN, +SPLIT_LEN), scores in log2 units; writes acc (GROUPS, D), max and sum.
    ``V_BLOCKS``: V in dim-major blocks of BLOCK_N tokens (else row-major, as K)."""
    bh, split, splits = tl.program_id(0), tl.program_id(1), tl.num_programs(1)
    offs_g, offs_d = tl.arange(0, G_PAD), tl.arange(0, D)
    q = tl.load(q_ptr + (bh * GROUPS + offs_g[:, None]) * D + offs_d[None, :], mask=offs_g[:, None] < GROUPS,
                other=0.0)
    q = (q.to(tl.float32) * (qk_scale * tl.load(ks_ptr + bh % KV_HEADS))).to(tl.float16)
    m = tl.full((G_PAD,), float("-inf"), tl.float32)
    total = tl.zeros((G_PAD,), tl.float32)
    acc = tl.zeros((G_PAD, D), tl.float32)
    first = (bh.to(tl.int64) * ctx + split * SPLIT_LEN) * D  # this slice's first key
    for n in range(0, SPLIT_LEN, BLOCK_N):
        offs = first + (n + tl.arange(0, BLOCK_N))[:, None] * D + offs_d[None, :]
        s = tl.dot(q, tl.trans(tl.load(k_ptr + offs).to(tl.float16)))
        m_new = tl.maximum(m, tl.max(s, 1))
        alpha = tl.exp2(m - m_new)
        p = tl.exp2(s - m_new[:, None])
        total = total * alpha + tl.sum(p, 1)
        if V_BLOCKS:  # the block's (D, BLOCK_N) tile, keys contiguous: read as K is
            v = tl.trans(tl.load(v_ptr + first + n * D + offs_d[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]))
        else:
            v = tl.load(v_ptr + offs)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v.to(tl.float16))
        m = m_new
    part = (bh * splits + split) * GROUPS + offs_g  # the padding rows are not written
    real = offs_g < GROUPS
    tl.store(o_ptr + part[:, None] * D + offs_d[None, :], acc, mask=real[:, None])
    tl.store(ml_ptr + part * 2, m, mask=real)
    tl.store(ml_ptr + part * 2 + 1, total, mask=real)


@triton.jit
def _pdl_enter(PDL: tl.constexpr, w_ptr=None, offs=None, inside=None):
    """A kernel's entry under programmatic dependent launch (``PDL``, launched with ``launch_pdl=True``;
    nothing without): let the next kernel launch, load ``w_ptr[offs]`` (``inside``) if given (what no
    kernel writes, e.g. norm weights, may be read early), then wait until the previous kernel completed
    and its writes are visible (``griddepcontrol.wait``). Returns what it loaded, else None."""
    w = None
    if PDL:
        gdc_launch_dependents()
        if w_ptr is not None:
            w = tl.load(w_ptr + offs, mask=inside, other=0.0)
        gdc_wait()
    return w


@triton.jit
def _combine(o_ptr, ml_ptr, vs_ptr, out_ptr, KV_HEADS: tl.constexpr, SPLITS: tl.constexpr, GROUPS: tl.constexpr,
             D: tl.constexpr, PDL: tl.constexpr = False):
    """Program (row * KV_HEADS + head) * GROUPS + g: merges the splits' partial outputs, times the V scale."""
    _pdl_enter(PDL)
    pid = tl.program_id(0)
    bh, g = pid // GROUPS, pid % GROUPS
    offs_s, offs_d = tl.arange(0, SPLITS), tl.arange(0, D)
    part = (bh * SPLITS + offs_s) * GROUPS + g
    m, total = tl.load(ml_ptr + part * 2), tl.load(ml_ptr + part * 2 + 1)
    w = tl.exp2(m - tl.max(m, 0))
    acc = tl.load(o_ptr + part[:, None] * D + offs_d[None, :])
    out = tl.sum(acc * w[:, None], 0) / tl.sum(total * w, 0) * tl.load(vs_ptr + bh % KV_HEADS)
    tl.store(out_ptr + pid * D + offs_d, out.to(out_ptr.dtype.element_ty))


def quantize_heads(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` (rows, kv_heads, context, dim) as e4m3 bits (uint8) and one fp32 scale per head."""
    scale = x.float().abs().amax(dim=(0, 2, 3)).clamp_min(1e-12) / 448.0
    x8 = (x.float() / scale[None, :, None, None]).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return x8.view(torch.uint8), scale


def block_values(v8: torch.Tensor) -> torch.Tensor:
    """``v8`` (rows, kv_heads, context, dim) as blocks of BLOCK_N tokens, each dim-major: (rows,
    kv_heads, context / BLOCK_N, dim, BLOCK_N). A server writes a token's values as one column of
    its block; here the whole cache is laid out once."""
    rows, heads, ctx, dim = v8.shape
    return v8.reshape(rows, heads, ctx // BLOCK_N, BLOCK_N, dim).transpose(3, 4).contiguous()


def fp8_decode_attention(q: torch.Tensor, k8: torch.Tensor, v8: torch.Tensor, k_scale: torch.Tensor,
                         v_scale: torch.Tensor, splits: int) -> torch.Tensor:
    """softmax(q k^T / sqrt(dim)) v for q (rows, kv_heads, groups, dim), k8 e4m3 (rows, kv_heads,
    context, dim), v8 the same or in ``block_values``'s layout (5 dimensions); ``splits`` (a power
    of two) slices of the context, each a multiple of BLOCK_N."""
    rows, heads, groups, dim = q.shape
    ctx = k8.shape[2]
    v_shape = (rows, heads, ctx // BLOCK_N, dim, BLOCK_N) if v8.dim() == 5 else k8.shape
    if groups > G_PAD or ctx % (splits * BLOCK_N) or splits & (splits - 1) or v8.shape != v_shape or not (
            q.is_contiguous() and k8.is_contiguous() and v8.is_contiguous()):
        raise ValueError(f"fp8_decode_attention: q {tuple(q.shape)}, k {tuple(k8.shape)}, v {tuple(v8.shape)}, "
                         f"{splits} splits")
    parts = torch.empty(rows * heads * splits * groups, dim, device=q.device, dtype=torch.float32)
    ml = torch.empty(rows * heads * splits * groups, 2, device=q.device, dtype=torch.float32)
    _attend[(rows * heads, splits)](q, k8, v8, k_scale, parts, ml, ctx, math.log2(math.e) / dim**0.5,
                                   SPLIT_LEN=ctx // splits, KV_HEADS=heads, GROUPS=groups, G_PAD=G_PAD, D=dim, BLOCK_N=BLOCK_N,
                                   V_BLOCKS=v8.dim() == 5, num_warps=4, num_stages=3)
    out = torch.empty_like(q)
    _combine[(rows * heads * groups,)](parts, ml, v_scale, out, KV_HEADS=heads, SPLITS=splits, GROUPS=groups,
                                       D=dim, num_warps=4)
    return out
