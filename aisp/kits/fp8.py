"""Weight-only fp8 (e4m3) linear layers for decode: a Triton kernel that streams e4m3 weights with a
scale per output channel, widens them to fp16 in registers and multiplies on the tensor cores
with fp16 activations (at most 16 rows: the decode regime, where reading the weights is the cost).

Written for chapter 13's ``quantization`` pair (its header has the design and the H200 figures);
chapter 16's ``fp8_weight_decode`` runs the serving decoder's linear layers through it.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK_M, BLOCK_N, BLOCK_K = 16, 128, 128
"""16 tokens per CTA (one mma row block), 128 output channels (16 KB of fp8 per K step)."""
TARGET_CTAS = 256
"""Split K until a layer has this many CTAs: two per SM on an H100/H200 (132 SMs)."""
GELU_C = tl.constexpr(2.0 * 0.7978845608028654)
"""tanh-GELU: 0.5 y (1 + tanh(u)) = y * sigmoid(2u), u = sqrt(2/pi) (y + 0.044715 y^3)."""


@triton.jit
def fp8_linear_kernel(x_ptr, w_ptr, s_ptr, y_ptr, M, N, K, K_SPLIT: tl.constexpr,
                      GELU: tl.constexpr, ATOMIC: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """y[:M, n-slab] (+)= (x[:M, k-range] @ w[n-slab, k-range]^T) * scale[n]; x fp16 (M, K),
    w e4m3 (N, K) row-major. Program (n-slab, k-split); each split covers K_SPLIT columns."""
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.program_id(1) * K_SPLIT + tl.arange(0, BLOCK_K)
    rows = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    x_ptrs = x_ptr + offs_m[:, None] * K + offs_k[None, :]
    w_ptrs = w_ptr + offs_n[None, :] * K + offs_k[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, K_SPLIT, BLOCK_K):
        x = tl.load(x_ptrs, mask=offs_m[:, None] < M, other=0.0)
        w = tl.load(w_ptrs).to(tl.float16)
        acc = tl.dot(x, w, acc)
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    y = acc * tl.load(s_ptr + offs_n)[None, :]
    if GELU:
        y = y * tl.sigmoid(GELU_C * (y + 0.044715 * y * y * y))
    out = y_ptr + offs_m[:, None] * N + offs_n[None, :]
    if ATOMIC:
        tl.atomic_add(out, y, mask=rows, sem="relaxed")
    else:
        tl.store(out, y.to(y_ptr.dtype.element_ty), mask=rows)


def k_splits(n: int, k: int) -> int:
    """Largest power of two that keeps each split a whole number of BLOCK_K steps and the grid
    at most TARGET_CTAS."""
    split = 1
    while (n // BLOCK_N) * split * 2 <= TARGET_CTAS and k % (BLOCK_K * split * 2) == 0:
        split *= 2
    return split


def fp8_linear(x: torch.Tensor, w8: torch.Tensor, scale: torch.Tensor, gelu: bool,
               out_dtype: torch.dtype) -> torch.Tensor:
    """(x @ (w8 * scale[:, None])^T), optionally GELU'd; x fp16 (M <= 16, K), w8 e4m3 (N, K)."""
    (m, k), n = x.shape, w8.shape[0]
    if m > BLOCK_M or n % BLOCK_N or k % BLOCK_K or w8.shape[1] != k or not (x.is_contiguous() and w8.is_contiguous()):
        raise ValueError(f"fp8_linear: x {tuple(x.shape)}, w {tuple(w8.shape)} are not contiguous tiles of "
                         f"({BLOCK_M}, {BLOCK_N}, {BLOCK_K})")
    split = 1 if gelu else k_splits(n, k)  # a GELU epilogue needs the whole K in one CTA
    if split > 1:  # partial sums land in a zeroed fp32 buffer
        y = torch.zeros(m, n, device=x.device, dtype=torch.float32)
    else:
        y = torch.empty(m, n, device=x.device, dtype=out_dtype)
    fp8_linear_kernel[(n // BLOCK_N, split)](x, w8, scale, y, m, n, k, K_SPLIT=k // split, GELU=gelu,
                                             ATOMIC=split > 1, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                                             BLOCK_K=BLOCK_K, num_warps=4, num_stages=4)
    return y.to(out_dtype) if split > 1 else y


def quantize_rows(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """e4m3 bits (as uint8, so the harness can compare them) and fp32 scales, one per row."""
    scale = w.float().abs().amax(dim=1).clamp_min(1e-12) / 448.0
    w8 = (w.float() / scale[:, None]).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return w8.view(torch.uint8), scale
