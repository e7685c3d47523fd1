"""The gate-weighted combine of the MoE case study's stage 3 (optimized_moe_layer_e2e_s3_fused_swiglu.py) as
one Triton gather pass: one program per (token, column block) loads the token's top_k expert rows of the
sorted outputs as one (top_k, BLOCK) tile (its rows from the sort's inverse), weights them by the gates and
sums them in fp32, and stores bf16 once. ``ch20_moe.combine`` writes the 0.54 GB of rows back in (token,
slot) order and reads them again in a (1 x k) @ (k x dim) ``bmm`` per token (0.26 + 0.49 ms profiled on an
H200); this reads them once and writes the 67 MB output (~0.15 ms at the HBM rate, an estimate).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from aisp.kits.moe import sorted_rows


@triton.jit
def _combine_tile(y_ptr, row_ptr, gate_ptr, out_ptr, D: tl.constexpr, K: tl.constexpr, BLOCK: tl.constexpr):
    """out[t, cols] = sum over slots s of gate[t, s] * y[row[t, s], cols]: the K rows as one (K, BLOCK) tile
    (K loads in flight at once), fp32 products and sum, stored in out's dtype."""
    t = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    slots = t * K + tl.arange(0, K)
    rows = tl.load(row_ptr + slots).to(tl.int64)
    tile = tl.load(y_ptr + rows[:, None] * D + cols[None, :]).to(tl.float32)
    weighted = tile * tl.load(gate_ptr + slots).to(tl.float32)[:, None]
    tl.store(out_ptr + t * D + cols, tl.sum(weighted, axis=0).to(out_ptr.dtype.element_ty))


def combine_gather(y_sorted: torch.Tensor, order: torch.Tensor, gates: torch.Tensor, block: int = 1024
                   ) -> torch.Tensor:
    """``ch20_moe.combine(y_sorted, order, gates)`` in one pass: (tokens, dim) in y's dtype. ``top_k`` a
    power of two; ``dim`` a multiple of ``min(block, dim)``, itself a power of two."""
    tokens, k = gates.shape
    dim = y_sorted.shape[1]
    block = min(block, dim)
    assert k == triton.next_power_of_2(k) and block == triton.next_power_of_2(block) and dim % block == 0, (k, dim)
    out = torch.empty(tokens, dim, device=y_sorted.device, dtype=y_sorted.dtype)
    grid = (tokens, dim // block)
    _combine_tile[grid](y_sorted, sorted_rows(order), gates.contiguous(), out, D=dim, K=k, BLOCK=block, num_warps=4)
    return out
