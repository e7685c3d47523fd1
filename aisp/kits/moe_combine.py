"""The MoE combine as one gather pass, shared by chapter 17's grouped GEMM
(optimized_moe_grouped_gemm_gather_combine.py and the variants built on it) and chapter 20's MoE case
study (stages 3 and 4).

After the expert GEMMs, row i of ``y`` is the output of the flat (token, slot) assignment ``order[i]``
(the assignments sorted by expert). The combine a model writes first scatters: ``y.float() * gate``
and an fp32 ``index_add_`` into a zeroed output, then a cast back (three fp32 passes over y's rows and
atomics; 3.40 of 7.08 ms of kernels in ch17's profile on an H200), or reorders the rows back and sums
them in a (1 x k) @ (k x dim) ``bmm`` a token (ch20's ``ch20_moe.combine``). Here the inverse of the
sort gives each (token, slot) its row of y, and one program per (token, column block) loads the
token's top_k rows and gates, sums them in fp32 in slot order (the same on every run) and stores once
in y's dtype: y is read once and the output written once, no atomics, no fp32 intermediate.

On an H200 (Nsight Compute, ch17 README): 138.9 us a call at 16,384 tokens x top-8 x dim 2,048, DRAM at
90% of its peak (4.34 TB/s). Compiled for sm_90 with ``dim`` a multiple of 16 (as Triton's launcher
specializes it), each thread loads its columns of the k rows as 16-byte loads and stores 16 bytes once
(tests/test_kits_moe_combine.py). Until 2026-11-29 chapter 20 had its own copy of this pass (the k rows
loaded as one tile, summed by ``tl.sum``; also ~142 us measured); one kernel now serves both.
"""

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


def combine_rows(y: torch.Tensor, row: torch.Tensor, gates: torch.Tensor, block: int = 1024) -> torch.Tensor:
    """(tokens, dim) in y's dtype: for each token, the rows ``row[t, s]`` of ``y`` (its top_k assignments'
    rows: the sort's inverse) weighted by ``gates`` (tokens, top_k) and summed in fp32. A router that
    already has the inverse (``aisp.kits.moe_topk_route.topk_route``) calls this directly."""
    tokens, k = gates.shape
    out = torch.empty(tokens, y.shape[1], device=y.device, dtype=y.dtype)
    _gather_combine[(tokens, triton.cdiv(y.shape[1], block))](y, row, gates.contiguous(), out, y.shape[1], k, block)
    return out


def gather_combine(y: torch.Tensor, order: torch.Tensor, gates: torch.Tensor, block: int = 1024) -> torch.Tensor:
    """``combine_rows`` from ``order`` (the sorted flat assignments), its inverse computed here."""
    return combine_rows(y, sorted_rows(order), gates, block)  # assignment (token, slot) -> its row of y
