"""The MoE combine as a gather (optimized_moe_grouped_gemm_gather_combine.py): one Triton program per
(token, column block) sums the token's top_k expert rows, gate-weighted, in fp32 and stores once."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from aisp.kits.moe import sorted_rows


@triton.jit
def _gather_combine(y_ptr, row_ptr, gate_ptr, out_ptr, dim, K: tl.constexpr, BLOCK: tl.constexpr):
    """out[t, cols] = sum_s gate[t, s] * y[row[t, s], cols] in fp32, stored in out's dtype."""
    t, cols = tl.program_id(0), tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    live = cols < dim
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in tl.static_range(K):
        row = tl.load(row_ptr + t * K + s).to(tl.int64)
        acc += tl.load(gate_ptr + t * K + s) * tl.load(y_ptr + row * dim + cols, mask=live, other=0.0).to(tl.float32)
    tl.store(out_ptr + t.to(tl.int64) * dim + cols, acc.to(out_ptr.dtype.element_ty), mask=live)


def gather_combine(y: torch.Tensor, order: torch.Tensor, gates: torch.Tensor, block: int = 1024) -> torch.Tensor:
    """(tokens, dim) in y's dtype: for each token, its top_k expert rows of ``y`` (rows in ``order``, the
    sorted flat assignments) weighted by ``gates`` (tokens, top_k) and summed in fp32."""
    tokens, k = gates.shape
    row = sorted_rows(order)  # assignment (token, slot) -> its row of y
    out = torch.empty(tokens, y.shape[1], device=y.device, dtype=y.dtype)
    _gather_combine[(tokens, triton.cdiv(y.shape[1], block))](y, row, gates.contiguous(), out, y.shape[1], k, block)
    return out
