"""Chapter 9's Triton row kernels (not a pair): RMSNorm and softmax with one program per row, the
row held in registers from its load to its store. Imported only where Triton is installed; the CPU
tests run them under TRITON_INTERPRET=1."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, eps, DIM: tl.constexpr, BLOCK: tl.constexpr):
    """y = (x * rsqrt(mean(x^2) + eps)) * w for one row: reads x once, writes y once. The normalized
    row is rounded to the output dtype before the weight multiplies it, as the eager module does."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < DIM
    x = tl.load(x_ptr + row * DIM + offs, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / DIM + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    normed = (x * rstd).to(y_ptr.dtype.element_ty).to(tl.float32)
    tl.store(y_ptr + row * DIM + offs, (normed * w).to(y_ptr.dtype.element_ty), mask=mask)


def rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float, out: torch.Tensor) -> torch.Tensor:
    """RMSNorm over the last dimension of a contiguous 2-D ``x`` into ``out``."""
    rows, dim = x.shape
    block = triton.next_power_of_2(dim)
    rmsnorm_kernel[(rows,)](x, w, out, eps, DIM=dim, BLOCK=block, num_warps=min(16, max(1, block // 256)))
    return out


@triton.jit
def softmax_kernel(x_ptr, y_ptr, COLS: tl.constexpr, BLOCK: tl.constexpr):
    """Online softmax of one row: a running max m and a running sum s rescaled by exp(m_old - m_new)
    in one pass over x (per lane, then combined), then a second pass writes exp(x - max) / sum. The
    second read of a 16 KB row hits L2: HBM sees one read and one write."""
    row = tl.program_id(0).to(tl.int64)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, COLS, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * COLS + offs, mask=offs < COLS, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)  # lanes that saw only padding stay 0
        s = s * tl.exp(m - shift) + tl.exp(x - shift)
        m = m_new
    row_max = tl.max(m, axis=0)
    total = tl.sum(s * tl.exp(m - row_max), axis=0)
    for start in range(0, COLS, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * COLS + offs, mask=offs < COLS, other=float("-inf")).to(tl.float32)
        y = tl.exp(x - row_max) / total
        tl.store(y_ptr + row * COLS + offs, y.to(y_ptr.dtype.element_ty), mask=offs < COLS)


def softmax(x: torch.Tensor, out: torch.Tensor, block: int = 2048) -> torch.Tensor:
    """Softmax over the last dimension of a contiguous 2-D ``x`` into ``out``."""
    rows, cols = x.shape
    block = min(block, triton.next_power_of_2(cols))
    softmax_kernel[(rows,)](x, out, COLS=cols, BLOCK=block, num_warps=8)
    return out
