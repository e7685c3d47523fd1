"""SwiGLU kernels for an MoE layer's experts over tokens sorted by expert, shared by chapter 17's grouped
GEMM (optimized_moe_grouped_gemm_graph.py, optimized_moe_grouped_gemm_fused_swiglu.py) and chapter 20's
MoE case study (optimized_moe_layer_e2e_s3_fused_swiglu.py): a row pass that reads the up GEMM's (rows,
2 ffn) output once and writes ``silu(gate) * up`` (rows, ffn), and the up GEMM itself as a persistent
grouped bf16 GEMM (Triton, wgmma fed by TMA) over the device schedule of aisp/kits/moe_schedule.py whose
epilogue stores ``silu(gate) * up``: each tile accumulates an expert's gate columns ``col0:col0 + BN``
and its up columns ``ffn + col0:ffn + col0 + BN`` from the same A tile, so the (rows, 2 ffn)
intermediate is never written. The weights are the MoE kit's layout (aisp/kits/moe.py): ``w_gate_up``
(experts, dim, 2 ffn), gate columns first."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from aisp.kits.moe_schedule import launch_persistent, sched_blocks, sched_tile

BM, BN, BK = 128, 128, 64
"""A 128-row block x 128 gate + 128 up columns (two 128 x 128 fp32 accumulators) x 64-deep bf16 steps."""
CONFIGS = [triton.Config({}, num_warps=8, num_stages=3),  # 3 x 48 KB of shared memory
           triton.Config({}, num_warps=8, num_stages=4)]  # 4 x 48 KB
ROWS = 8
"""Rows per program of the SwiGLU row pass."""


@triton.jit
def _silu_mul(g, u):
    """silu(g) * u in fp32."""
    return g / (1.0 + tl.exp(-g)) * u


@triton.jit
def _swiglu_rows(h_ptr, out_ptr, n_rows, F: tl.constexpr, ROWS: tl.constexpr):
    """out[r] = silu(h[r, :F]) * h[r, F:] for ROWS rows a program, fp32 math, stored in out's dtype."""
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, F)
    live = r[:, None] < n_rows
    row = h_ptr + r.to(tl.int64)[:, None] * (2 * F) + cols[None, :]
    g = tl.load(row, mask=live, other=0.0).to(tl.float32)
    u = tl.load(row + F, mask=live, other=0.0).to(tl.float32)
    out = out_ptr + r.to(tl.int64)[:, None] * F + cols[None, :]
    tl.store(out, _silu_mul(g, u).to(out_ptr.dtype.element_ty), mask=live)


def swiglu_rows(h: torch.Tensor) -> torch.Tensor:
    """``aisp.kits.moe.swiglu(h)`` for (rows, 2 ffn) ``h`` (ffn a power of two), one read and one write."""
    rows, f = h.shape[0], h.shape[1] // 2
    out = torch.empty(rows, f, device=h.device, dtype=h.dtype)
    _swiglu_rows[(triton.cdiv(rows, ROWS),)](h, out, rows, F=f, ROWS=ROWS, num_warps=4)
    return out


@triton.autotune(CONFIGS, key=["F", "K"])
@triton.jit
def _grouped_swiglu(a_desc, b_desc, h_ptr, sched_ptr, E1, F, K: tl.constexpr, programs, BM: tl.constexpr,
                    BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr = 8, MAX_E: tl.constexpr = 64):
    """h[r, c] = silu(a[r] @ b[e][:, c]) * (a[r] @ b[e][:, F + c]) for the rows r of each expert e's blocks
    (a: (rows, K), b: (E * K, 2 F), both by TMA; rows past a block's expert are multiplied, never stored)."""
    tile_end, blocks = sched_blocks(sched_ptr, E1, MAX_E)
    col_tiles = F // BN
    t = tl.program_id(0)
    while t < blocks * col_tiles:  # persistent; programs past the last tile exit
        e, row0, row1, col0 = sched_tile(t, blocks, col_tiles, tile_end, sched_ptr, E1, BM, BN, GROUP)
        gate = tl.zeros((BM, BN), dtype=tl.float32)
        up = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            a = a_desc.load([row0, k])
            gate = tl.dot(a, b_desc.load([e * K + k, col0]), gate)
            up = tl.dot(a, b_desc.load([e * K + k, F + col0]), up)
        rows, cols = row0 + tl.arange(0, BM), col0 + tl.arange(0, BN)
        out = h_ptr + rows.to(tl.int64)[:, None] * F + cols[None, :]
        tl.store(out, _silu_mul(gate, up).to(h_ptr.dtype.element_ty), mask=rows[:, None] < row1)
        t += programs


def grouped_swiglu(xs: torch.Tensor, w_gate_up: torch.Tensor, sched: torch.Tensor,
                   tile: tuple[int, int, int] = (BM, BN, BK)) -> torch.Tensor:
    """``swiglu(xs[rows of e] @ w_gate_up[e])`` for each expert e over the schedule ``sched`` (2, E + 1) of
    ``tile[0]``-row blocks (aisp.kits.moe_schedule.schedule): (rows, ffn) in xs' dtype. One program per SM
    (autotuned); another ``tile``: 4 programs, the CPU tests (interpreter)."""
    (e, k, f2), (bm, bn, bk) = w_gate_up.shape, tile
    assert e <= 64 and sched.shape == (2, e + 1) and (f2 // 2) % bn == 0 and k % bk == 0, "MAX_E, tile sizes"
    h = torch.empty(xs.shape[0], f2 // 2, device=xs.device, dtype=xs.dtype)
    a_desc = TensorDescriptor.from_tensor(xs, [bm, bk])
    b_desc = TensorDescriptor.from_tensor(w_gate_up.reshape(e * k, f2), [bk, bn])
    args = (a_desc, b_desc, h, sched, e + 1, f2 // 2, k)
    launch_persistent(_grouped_swiglu, args, tile, (BM, BN, BK), xs.device)
    return h
