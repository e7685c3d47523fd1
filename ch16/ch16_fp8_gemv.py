"""A weight-only fp8 (e4m3) GEMV for decode: y = x @ (w8 * scale[:, None])^T for at most 16 rows of x,
written for the memory-bound small-M regime of ``fp8_weight_decode``'s ``_gemv`` variant.

At 8 rows each weight byte feeds 8 multiply-adds: 4.2 TB/s of e4m3 would need ~67 TFLOP/s of fp32
FMA, all an H200's CUDA cores have, so the products still run on the tensor cores, but with the
operands swapped (y^T = w @ x^T): the weights are the MMA's M side (BLOCK_N output channels, K
contiguous as the MMA wants them, so each thread loads 16 bytes at a time and widens them to fp16
in registers, two values per instruction), and the 8 token rows are its N side, which the MMA takes
down to 8 (no padding to 16 rows as ``aisp.kits.fp8`` pads them). x is read in its own dtype and cast
to fp16 in registers (no cast kernel). Layers with too few output blocks to cover the SMs split K
over programs that write fp32 partial sums to a workspace; a second small kernel adds them, applies
the scale and writes x's dtype: no atomics, no zeroing pass. Both kernels allocate nothing the CUDA
graph cannot hold (the workspace comes from the caching allocator, the graph's pool when captured).

Chapter-local: ch13:quantization's figures are the kit's kernel (``aisp.kits.fp8``); this one moves
to the kit once an H200 has measured it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from aisp.kits.fp8_layers import FP8Linear

MAX_ROWS = 16
"""Most rows of x per call: the decode regime (a prefill is compute-bound: widen and run one GEMM)."""


@dataclass(frozen=True)
class GemvConfig:
    """One launch shape of :func:`_gemv_fp8`."""

    block_n: int = 128
    """Output channels per program (the MMA's M side: one warpgroup's wgmma is 64 rows)."""
    block_k: int = 128
    """K columns per loop step: block_n x block_k bytes of e4m3 (16 KB) per stage."""
    stages: int = 5
    """Loop stages (global -> shared copies issued ahead): 4 x 18 KB buffers (72 KB of shared
    memory, so 3 programs fit an SM), up to ~200 KB of weights in flight per SM."""
    warps: int = 4
    max_split: int = 8
    """Most K splits (each split's partials are M x N x 4 bytes, written and read through L2)."""


CONFIG = GemvConfig()
SMS = 132
"""Streaming multiprocessors of an H100/H200 SXM (the split aims at two programs per SM)."""


@triton.jit
def _gemv_fp8(x_ptr, w_ptr, s_ptr, y_ptr, M, N, K, K_SPLIT, ROWS: tl.constexpr, PARTIAL: tl.constexpr,
              BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GLU: tl.constexpr = False):
    """Program (n-block, k-split): acc[BLOCK_N, ROWS] = w[n-block, k-range] @ x[:M, k-range]^T.
    PARTIAL: acc to y (fp32, (splits, M, N)) unscaled; else acc * scale to y (M, N) in y's dtype.
    GLU: x is (M, 2K), [gate | up], and the product reads silu(gate) * up (each rounded to x's
    dtype, as the eager SwiGLU rounds them) in registers: no activation kernel."""
    pid_n, pid_k = tl.program_id(0), tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, ROWS)
    offs_k = pid_k * K_SPLIT + tl.arange(0, BLOCK_K)
    in_n, in_m = offs_n < N, offs_m < M
    w_ptrs = w_ptr + offs_n[:, None] * K + offs_k[None, :]
    x_ptrs = x_ptr + offs_m[None, :] * (2 * K if GLU else K) + offs_k[:, None]
    acc = tl.zeros((BLOCK_N, ROWS), dtype=tl.float32)
    for _ in range(0, K_SPLIT, BLOCK_K):
        w = tl.load(w_ptrs, mask=in_n[:, None], other=0.0).to(tl.float16)
        if GLU:
            gate = tl.load(x_ptrs, mask=in_m[None, :], other=0.0).to(tl.float32)
            act = (gate / (1.0 + tl.exp(-gate))).to(x_ptr.dtype.element_ty).to(tl.float32)
            up = tl.load(x_ptrs + K, mask=in_m[None, :], other=0.0).to(tl.float32)
            x = (act * up).to(x_ptr.dtype.element_ty).to(tl.float16)
        else:
            x = tl.load(x_ptrs, mask=in_m[None, :], other=0.0).to(tl.float16)
        acc = tl.dot(w, x, acc)
        w_ptrs += BLOCK_K
        x_ptrs += BLOCK_K
    mask = in_n[:, None] & in_m[None, :]
    if PARTIAL:
        tl.store(y_ptr + pid_k * M * N + offs_m[None, :] * N + offs_n[:, None], acc, mask=mask)
    else:
        y = acc * tl.load(s_ptr + offs_n, mask=in_n, other=0.0)[:, None]
        tl.store(y_ptr + offs_m[None, :] * N + offs_n[:, None], y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _sum_splits(p_ptr, s_ptr, y_ptr, MN, N, SPLITS: tl.constexpr, BLOCK: tl.constexpr):
    """y[i] = scale[i % N] * sum over splits of partials[split, i], for i in this program's block of M*N."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < MN
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for split in tl.static_range(SPLITS):
        acc += tl.load(p_ptr + split * MN + offs, mask=inside, other=0.0)
    y = acc * tl.load(s_ptr + offs % N, mask=inside, other=0.0)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=inside)


def k_splits(n: int, k: int, cfg: GemvConfig = CONFIG, sms: int = SMS) -> int:
    """1 where the output blocks alone fill the SMs; else the smallest power of two (at most
    ``cfg.max_split``, each split a whole number of K steps) that gives two programs per SM."""
    blocks, split = triton.cdiv(n, cfg.block_n), 1
    if blocks >= sms:
        return 1
    while blocks * split < 2 * sms and split < cfg.max_split and k % (cfg.block_k * split * 2) == 0:
        split *= 2
    return split


def gemv_launch(x: torch.Tensor, w8: torch.Tensor, scale: torch.Tensor, partial: bool, glu: bool = False,
                cfg: GemvConfig = CONFIG) -> torch.Tensor:
    """The GEMV kernel alone: (M, N) in x's dtype, scaled, where K is not split and not ``partial``;
    else the splits' unscaled fp32 partials (splits, M, N) for the caller to sum (``fp8_gemv``'s
    second kernel, or a fused one). ``glu``: x is (M, 2K), silu(gate) * up is the GEMV's input."""
    (m, kx), n = x.shape, w8.shape[0]
    k = kx // 2 if glu else kx
    if (not 0 < m <= MAX_ROWS or w8.shape[1] != k or kx != k * (1 + glu) or k % cfg.block_k or n * kx >= 2**31
            or not (x.is_contiguous() and w8.is_contiguous())):
        raise ValueError(f"fp8_gemv: x {tuple(x.shape)}, w {tuple(w8.shape)}: needs 1..{MAX_ROWS} contiguous rows, "
                         f"K a multiple of {cfg.block_k} and N x K < 2^31")
    split, rows = k_splits(n, k, cfg), 8 if m <= 8 else MAX_ROWS
    partial = partial or split > 1
    out = torch.empty(split, m, n, device=x.device, dtype=torch.float32 if partial else x.dtype)
    _gemv_fp8[(triton.cdiv(n, cfg.block_n), split)](
        x, w8, scale, out, m, n, k, k // split, ROWS=rows, PARTIAL=partial, BLOCK_N=cfg.block_n,
        BLOCK_K=cfg.block_k, GLU=glu, num_warps=cfg.warps, num_stages=cfg.stages)
    return out if partial else out[0]


def fp8_gemv(x: torch.Tensor, w8: torch.Tensor, scale: torch.Tensor, cfg: GemvConfig = CONFIG) -> torch.Tensor:
    """x (M <= 16, K) in any float dtype, w8 e4m3 (N, K), scale fp32 (N,) -> (M, N) in x's dtype."""
    out = gemv_launch(x, w8, scale, False, cfg=cfg)
    if out.dim() == 2:
        return out
    split, m, n = out.shape  # K split: sum the partials, scale
    y = torch.empty(m, n, device=x.device, dtype=x.dtype)
    _sum_splits[(triton.cdiv(m * n, 1024),)](out, scale, y, m * n, n, SPLITS=split, BLOCK=1024, num_warps=4)
    return y


class GemvFP8Linear(FP8Linear):
    """:class:`aisp.kits.fp8_layers.FP8Linear` (same e4m3 bits and scales) whose decode rows go
    through :func:`fp8_gemv` (decode only: at most :data:`MAX_ROWS` rows, as the kit's layer)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = fp8_gemv(x.reshape(-1, x.shape[-1]).contiguous(), self.w8.view(torch.float8_e4m3fn), self.scale)
        return y.view(*x.shape[:-1], -1)
