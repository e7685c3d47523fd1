"""The Triton matmul of the triton_autotune pair: one kernel, launched with a fixed configuration or
through ``@triton.autotune``. Tiles of C are visited in groups of GROUP_M rows so neighbouring
programs share A and B tiles in L2 (the Triton matmul tutorial's ordering). Imported only where
Triton is installed; its CPU test runs it under TRITON_INTERPRET=1."""

from __future__ import annotations

from collections.abc import Callable

import torch
import triton
import triton.language as tl

FIXED = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 3}
"""A first guess: a 64 x 64 tile with Triton's default warps (4) and stages (3)."""
TUNE_SPACE = [
    (128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 256, 64, 8, 4), (128, 128, 64, 8, 4),
    (128, 128, 64, 4, 4), (64, 256, 64, 4, 4), (128, 64, 64, 4, 4), (64, 64, 32, 4, 3),
]
"""(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) candidates; the last is FIXED, so tuning can
only match or beat it. Stage counts fit Hopper's 227 KB of shared memory per block in bf16."""
CONFIGS = [triton.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k}, num_warps=w, num_stages=s)
           for m, n, k, w, s in TUNE_SPACE]


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K: tl.constexpr, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """C = A @ B, one BLOCK_M x BLOCK_N tile of C per program, fp32 accumulation. K is a compile-time
    constant (one specialization per K; it also keeps the loop runnable under TRITON_INTERPRET=1)."""
    pid = tl.program_id(0)
    num_m, num_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * num_n
    first_m = (pid // per_group) * GROUP_M
    group_rows = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_rows
    pid_n = (pid % per_group) // group_rows
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_left = K - k0
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty), mask=mask)


matmul_tuned = triton.autotune(configs=CONFIGS, key=["M", "N", "K"])(matmul_kernel)
"""The same kernel, its configuration picked per (M, N, K) by timing every CONFIGS entry on the first call."""


def launch(kernel: Callable, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, **config: int) -> torch.Tensor:
    """c = a @ b with ``kernel`` (matmul_kernel with a config, or matmul_tuned without one)."""
    (m, k), n = a.shape, b.shape[1]

    def grid(meta: dict) -> tuple[int]:
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

    kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                 GROUP_M=8, **config)
    return c
