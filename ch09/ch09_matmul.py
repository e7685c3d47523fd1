"""Chapter 9's Triton matmul (not a pair): one kernel for triton_matmul and split_k, its tiles,
pipeline depth, launch order and K split given by a :class:`Tiling`. Imported only where Triton is
installed; the CPU tests run it under TRITON_INTERPRET=1."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl


@dataclass(frozen=True)
class Tiling:
    """How the kernel cuts C = A @ B into programs."""

    bm: int = 128
    """Rows of C per program."""
    bn: int = 128
    """Columns of C per program."""
    bk: int = 64
    """K depth of one step (one tl.dot)."""
    group_m: int = 1
    """Rows of tiles visited together (1: row-major launch order; 8: neighbours share B in L2)."""
    split_k: int = 1
    """Programs per tile along K, each writing an fp32 partial that a second kernel sums."""
    warps: int = 4
    stages: int = 3
    """Shared-memory pipeline depth: loads in flight ahead of the tl.dot that consumes them."""


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K_SPLIT: tl.constexpr, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cs, stride_cm, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr):
    """One BLOCK_M x BLOCK_N tile of C over K range [pid_k * K_SPLIT, (pid_k + 1) * K_SPLIT), fp32
    accumulation, stored at c_ptr + pid_k * stride_cs in c's dtype. K_SPLIT is a multiple of BLOCK_K
    and a compile-time constant (it keeps the loop runnable under TRITON_INTERPRET=1)."""
    pid, pid_k = tl.program_id(0), tl.program_id(1)
    num_m, num_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * num_n
    first_m = (pid // per_group) * GROUP_M
    group_rows = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_rows
    pid_n = (pid % per_group) // group_rows
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = pid_k * K_SPLIT + tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, K_SPLIT, BLOCK_K):
        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    out = c_ptr + pid_k * stride_cs + rows[:, None] * stride_cm + cols[None, :]
    tl.store(out, acc.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def sum_splits_kernel(parts_ptr, c_ptr, NUMEL, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr):
    """c = sum of the SPLIT_K fp32 partials, rounded once to c's dtype."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < NUMEL
    acc = tl.zeros([BLOCK], tl.float32)
    for s in tl.static_range(SPLIT_K):
        acc += tl.load(parts_ptr + s * NUMEL + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty), mask=mask)


def partials(a: torch.Tensor, b: torch.Tensor, tiling: Tiling) -> torch.Tensor | None:
    """The fp32 buffer split-K needs for ``a @ b`` (None without a split): allocate once, reuse."""
    if tiling.split_k == 1:
        return None
    return torch.empty(tiling.split_k, a.shape[0], b.shape[1], device=a.device, dtype=torch.float32)


def matmul(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, tiling: Tiling,
           parts: torch.Tensor | None = None) -> torch.Tensor:
    """c = a @ b (row-major, c contiguous); with ``tiling.split_k > 1`` through ``parts``."""
    (m, k), n, t = a.shape, b.shape[1], tiling
    if k % (t.split_k * t.bk):
        raise ValueError(f"K={k} is not a multiple of split_k * bk = {t.split_k * t.bk}")
    target = c if t.split_k == 1 else parts
    grid = (triton.cdiv(m, t.bm) * triton.cdiv(n, t.bn), t.split_k)
    matmul_kernel[grid](a, b, target, m, n, k // t.split_k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        m * n, n, BLOCK_M=t.bm, BLOCK_N=t.bn, BLOCK_K=t.bk, GROUP_M=t.group_m,
                        num_warps=t.warps, num_stages=t.stages)
    if t.split_k > 1:
        block = 1024
        sum_splits_kernel[(triton.cdiv(m * n, block),)](parts, c, m * n, SPLIT_K=t.split_k, BLOCK=block)
    return c
