"""4-bit weights stored two per byte (the format; optimized_w4a16_gemm.py decodes it inside a GEMM).

Format (chosen so a kernel decodes a contiguous half-tile per load): weight ``w`` (N, K) is split into
groups of ``GROUP`` values along K, each with one bf16 scale; a value is ``scale * (u - 8)`` with u a
4-bit code 0..15. Byte ``packed[n, j]`` holds column j in its low nibble and column ``j + K/2`` in its
high nibble, so one (BN, BK) byte tile yields the weights of columns k0.. and k0 + K/2.. at once.
Hopper has no 4-bit tensor cores (NVFP4/MXFP4 are Blackwell's): 4 bits here is a storage format
that quarters the bytes a decode-shaped GEMM reads; the multiply runs in bf16.
"""

from __future__ import annotations

import torch

GROUP = 128


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


ROWS, STEP = 32, 128
"""The tiled format's unit (rows) and step (packed bytes of a row: one group of low and one of high nibbles)."""


def tile_w4(packed: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The same codes and scales reordered for w4a16_stream.cu's tiled kernel (shapes kept; N a multiple
    of 32, K of 256): done once, when the weights are packed, as a deployment stores them. Row 32u + 8b + g,
    step s, bytes 64h + 16t.. go to (((u * K/256 + s) * 2 + h) * 4 + b) * 512 + 16 (4g + t): each 16-byte
    load of a warp reads 512 contiguous bytes, a step of a unit 4 KB. Scales: lane g's 8 of step s
    (block b, low or high nibbles) at ((u * 8 + g) * K/256 + s) * 8 + 2b + lohi, one 16-byte load."""
    n, half = packed.shape
    if n % ROWS or half % STEP:
        raise ValueError(f"tile_w4 needs N a multiple of {ROWS} and K of {2 * STEP}; got {n}, {2 * half}")
    units, steps = n // ROWS, half // STEP
    tiled = packed.reshape(units, 4, 8, steps, 2, 4, 16).permute(0, 3, 4, 1, 2, 5, 6)
    scales = scale.reshape(units, 4, 8, 2, steps).permute(0, 2, 4, 1, 3)
    return tiled.contiguous().reshape(n, half), scales.contiguous().reshape(scale.shape)
