"""An MoE up GEMM with the row gather fused into its A load, shared by chapter 17's grouped GEMM
(optimized_moe_grouped_gemm_fused_gather.py) and chapter 20's MoE case study
(optimized_moe_layer_e2e_s4_fused_gather.py): ``aisp.kits.moe_swiglu.grouped_swiglu``'s persistent grouped bf16
GEMM with the SwiGLU epilogue, over the same device schedule (aisp/kits/moe_schedule.py), whose x tile is read
row by row from the unsorted tokens: a block's rows are sorted assignments ``order[row0:row0 + BM]``, each the
token ``order[r] // top_k``, so the (rows, dim) gathered copy of x is never written nor read back. The x rows
come by per-thread 16-byte loads that Triton's pipeliner turns into cp.async into shared memory (TMA cannot
gather rows on sm_90); the weights stay on TMA."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from aisp.kits.moe_schedule import launch_persistent, sched_blocks, sched_tile
from aisp.kits.moe_swiglu import BK, BM, BN, CONFIGS, _silu_mul


@triton.autotune(CONFIGS, key=["F", "K"])
@triton.jit
def _gather_swiglu(x_ptr, order_ptr, b_desc, h_ptr, sched_ptr, E1, F, K: tl.constexpr, TOP_K: tl.constexpr, programs,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr = 8,
                   MAX_E: tl.constexpr = 64):
    """h[r, c] = silu(x[t] @ b[e][:, c]) * (x[t] @ b[e][:, F + c]), t = order[r] // TOP_K, for the sorted rows r
    of each expert e's blocks (x: (tokens, K) by pointer loads, b: (E * K, 2 F) by TMA; rows past a block's
    expert read token 0 and are never stored)."""
    tile_end, blocks = sched_blocks(sched_ptr, E1, MAX_E)
    col_tiles = F // BN
    t = tl.program_id(0)
    while t < blocks * col_tiles:  # persistent; programs past the last tile exit
        e, row0, row1, col0 = sched_tile(t, blocks, col_tiles, tile_end, sched_ptr, E1, BM, BN, GROUP)
        rows = row0 + tl.arange(0, BM)
        token = tl.load(order_ptr + rows, mask=rows < row1, other=0) // TOP_K
        a_ptrs = x_ptr + token[:, None] * K + tl.arange(0, BK)[None, :]  # K constexpr: 16-byte row pieces
        gate = tl.zeros((BM, BN), dtype=tl.float32)
        up = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            a = tl.load(a_ptrs + k)
            gate = tl.dot(a, b_desc.load([e * K + k, col0]), gate)
            up = tl.dot(a, b_desc.load([e * K + k, F + col0]), up)
        cols = col0 + tl.arange(0, BN)
        out = h_ptr + rows.to(tl.int64)[:, None] * F + cols[None, :]
        tl.store(out, _silu_mul(gate, up).to(h_ptr.dtype.element_ty), mask=rows[:, None] < row1)
        t += programs


def gather_swiglu(x: torch.Tensor, order: torch.Tensor, top_k: int, w_gate_up: torch.Tensor, sched: torch.Tensor,
                  tile: tuple[int, int, int] = (BM, BN, BK)) -> torch.Tensor:
    """``grouped_swiglu(x[order // top_k], w_gate_up, sched)`` without the gathered copy: (rows, ffn) in x's dtype
    for the int32 sorted assignments ``order`` (``device_route``'s) over the schedule ``sched`` (2, E + 1) of
    ``tile[0]``-row blocks. One program per SM (autotuned); another ``tile``: 4 programs (interpreter tests)."""
    (e, k, f2), (_, bn, bk) = w_gate_up.shape, tile
    assert e <= 64 and sched.shape == (2, e + 1) and (f2 // 2) % bn == 0 and k % bk == 0, "MAX_E, tile sizes"
    assert x.shape[1] == k and x.is_contiguous() and x.numel() < 2 ** 31 and order.dtype == torch.int32
    h = torch.empty(order.numel(), f2 // 2, device=x.device, dtype=x.dtype)
    b_desc = TensorDescriptor.from_tensor(w_gate_up.reshape(e * k, f2), [bk, bn])
    args = (x, order, b_desc, h, sched, e + 1, f2 // 2, k, top_k)
    launch_persistent(_gather_swiglu, args, tile, (BM, BN, BK), x.device)
    return h
