"""4-bit weights stored two per byte, decoded to bf16 either ahead of a GEMM or inside one.

Format (chosen so a kernel decodes a contiguous half-tile per load): weight ``w`` (N, K) is split into
groups of ``GROUP`` values along K, each with one bf16 scale; a value is ``scale * (u - 8)`` with u a
4-bit code 0..15. Byte ``packed[n, j]`` holds column j in its low nibble and column ``j + K/2`` in its
high nibble, so one (BN, BK) byte tile yields the weights of columns k0.. and k0 + K/2.. at once.
Hopper has no 4-bit tensor cores (NVFP4/MXFP4 are Blackwell's): 4 bits here is a storage format
that quarters the bytes a decode-shaped GEMM reads; the multiply runs in bf16.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

GROUP = 128
BN, BK = 128, 128


def quantize_w4(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(packed uint8 (N, K/2), bf16 scales (N, K/GROUP)) of ``w`` (N, K), symmetric per group."""
    n, k = w.shape
    groups = w.float().reshape(n, k // GROUP, GROUP)
    scale = (groups.abs().amax(-1, keepdim=True) / 7.5).clamp_min(1e-8).bfloat16()
    codes = (groups / scale.float() + 8).round().clamp(0, 15).to(torch.uint8).reshape(n, k)
    packed = codes[:, : k // 2] | (codes[:, k // 2:] << 4)
    return packed, scale.reshape(n, k // GROUP)


def dequantize_w4(packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """bf16 (N, K) weights: every code decoded and scaled (fp32 product, rounded to bf16)."""
    codes = torch.cat([packed & 0xF, packed >> 4], dim=1).float() - 8
    n, k = codes.shape
    groups = codes.reshape(n, k // GROUP, GROUP) * scale.float().unsqueeze(-1)
    return groups.reshape(n, k).bfloat16()


@triton.jit
def codes_plus_128(nibbles, dtype: tl.constexpr):
    """128 + code, exactly. In bf16 no conversion instruction is needed: exponent 2^7 (bits 0x4300)
    with the code in the low mantissa bits is 128 + code, since bf16's step at 128 is 1."""
    if dtype == tl.bfloat16:
        return (nibbles.to(tl.uint16) | 0x4300).to(tl.bfloat16, bitcast=True)
    else:
        return nibbles.to(dtype) + 128.0


@triton.jit
def _group_product(x, nibbles, scale):
    """sum_k x[m, k] * scale[n] * (code[n, k] - 8) over one 128-wide group, fp32 (BM, BN): the dot
    runs on 128 + code and subtracts 136 * sum_k x; the group's scale is applied once per output."""
    dot = tl.dot(x, tl.trans(codes_plus_128(nibbles, x.dtype)))
    x_sum = tl.sum(x.to(tl.float32), axis=1)
    return (dot - 136.0 * x_sum[:, None]) * scale[None, :].to(tl.float32)


@triton.jit
def _w4a16_gemm(x_ptr, p_ptr, s_ptr, y_ptr, M, N, K, GROUPS, HALF: tl.constexpr, BM: tl.constexpr,
                BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.program_id(0) * BN + tl.arange(0, BN)
    rows = rm[:, None] < M
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, HALF, BK):
        rk = k0 + tl.arange(0, BK)
        packed = tl.load(p_ptr + rn[:, None] * HALF + rk[None, :])
        x_lo = tl.load(x_ptr + rm[:, None] * K + rk[None, :], mask=rows, other=0.0)
        x_hi = tl.load(x_ptr + rm[:, None] * K + HALF + rk[None, :], mask=rows, other=0.0)
        acc += _group_product(x_lo, packed & 0xF, tl.load(s_ptr + rn * GROUPS + k0 // GROUP))
        acc += _group_product(x_hi, packed >> 4, tl.load(s_ptr + rn * GROUPS + (k0 + HALF) // GROUP))
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc.to(y_ptr.dtype.element_ty), mask=rows)


def w4a16_matmul(x: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``x @ w^T`` for x (M <= 16, K) and ``w`` in the 4-bit format above, multiplied in x's dtype (bf16 on
    a GPU; fp32 in the CPU tests: the Triton interpreter multiplies bf16 tiles wrongly)."""
    m, k = x.shape
    n = packed.shape[0]
    if m > 16 or (k // 2) % BK or n % BN or not x.is_contiguous():
        raise ValueError(f"w4a16_matmul needs M <= 16, K a multiple of {2 * BK}, N of {BN}")
    y = torch.empty(m, n, device=x.device, dtype=x.dtype)
    _w4a16_gemm[(n // BN,)](x, packed, scale, y, m, n, k, k // GROUP, HALF=k // 2, BM=16, BN=BN, BK=BK,
                            GROUP=GROUP, num_warps=4, num_stages=4)
    return y
