"""The Triton matmuls of the triton_tma and persistent_matmul pairs: C = A @ B (bf16 in and out,
fp32 accumulation), A (M x K) and B (K x N) row-major, M, N, K multiples of the tile.

- ``matmul_pointers``: one program per C tile; A and B tiles loaded from computed pointers.
- ``matmul_descriptors``: the same with TMA tensor descriptors (host ``TensorDescriptor``) for the
  A and B loads and the C store.
- ``matmul_persistent``: as many programs as SMs, each walking the tile queue (tile, tile + SMs,
  ...) with descriptors; ``tl.range(..., flatten=True)`` fuses the tile loop and the K loop into one
  software pipeline, so the next tile's loads are in flight during this tile's epilogue.

Tiles are visited in groups of GROUP_M rows so neighbouring programs share A and B tiles in L2.
Imported only where Triton is installed; the CPU tests run it under TRITON_INTERPRET=1.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

CONFIG = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3}
"""One tile configuration for every kernel, so each pair changes only how tiles are fetched or
scheduled: 128 x 256 x 64 bf16, 3 stages = 144 KB of shared memory, 2 consumer warpgroups."""


@triton.jit
def tile_coords(tile, num_m, num_n, GROUP_M: tl.constexpr):
    """The (row, column) of C tile number ``tile`` in grouped order."""
    per_group = GROUP_M * num_n
    first_m = (tile // per_group) * GROUP_M
    rows = tl.minimum(num_m - first_m, GROUP_M)
    return first_m + (tile % per_group) % rows, (tile % per_group) // rows


@triton.jit
def matmul_pointers(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid_m, pid_n = tile_coords(tl.program_id(0), M // BLOCK_M, N // BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * K + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * N + offs_n[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, K, BLOCK_K):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * N
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(c_ptr.dtype.element_ty))


@triton.jit
def matmul_descriptors(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid_m, pid_n = tile_coords(tl.program_id(0), M // BLOCK_M, N // BLOCK_N, GROUP_M)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        acc = tl.dot(a_desc.load([pid_m * BLOCK_M, k]), b_desc.load([k, pid_n * BLOCK_N]), acc)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))


@triton.jit
def matmul_persistent(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, NUM_PROGRAMS: tl.constexpr):
    num_m, num_n = M // BLOCK_M, N // BLOCK_N
    for tile in tl.range(tl.program_id(0), num_m * num_n, NUM_PROGRAMS, flatten=True):
        pid_m, pid_n = tile_coords(tile, num_m, num_n, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, K, BLOCK_K):
            acc = tl.dot(a_desc.load([pid_m * BLOCK_M, k]), b_desc.load([k, pid_n * BLOCK_N]), acc)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))


def _check(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, cfg: dict) -> tuple[int, int, int]:
    (m, k), n = a.shape, b.shape[1]
    assert b.shape[0] == k and c.shape == (m, n), (a.shape, b.shape, c.shape)
    assert m % cfg["BLOCK_M"] == 0 and n % cfg["BLOCK_N"] == 0 and k % cfg["BLOCK_K"] == 0, "shape not a tile multiple"
    assert a.is_contiguous() and b.is_contiguous() and c.is_contiguous()
    return m, n, k


def descriptors(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, cfg: dict) -> tuple[TensorDescriptor, ...]:
    """Host-side TMA descriptors (base, shape, strides, box) of A, B and C for the tile shape."""
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    return (TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b, [bk, bn]),
            TensorDescriptor.from_tensor(c, [bm, bn]))


def launch(kind: str, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, programs: int = 0,
           cfg: dict = CONFIG) -> torch.Tensor:
    """c = a @ b with ``kind`` "pointers", "descriptors" or "persistent" (``programs``: the SM count)."""
    m, n, k = _check(a, b, c, cfg)
    tiles = (m // cfg["BLOCK_M"]) * (n // cfg["BLOCK_N"])
    if kind == "pointers":
        matmul_pointers[(tiles,)](a, b, c, m, n, k, **cfg)
    elif kind == "descriptors":
        matmul_descriptors[(tiles,)](*descriptors(a, b, c, cfg), m, n, k, **cfg)
    else:
        assert programs > 0, "the persistent kernel needs the number of programs (the SM count)"
        grid = min(programs, tiles)
        matmul_persistent[(grid,)](*descriptors(a, b, c, cfg), m, n, k, NUM_PROGRAMS=grid, **cfg)
    return c
