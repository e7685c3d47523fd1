"""Chapter 19's grouped fp8 GEMM over the device schedule (optimized_fp8_moe_device_schedule.py): the grouped
fp8 GEMM of optimized_fp8_moe_triton.py reading the tile schedule that ``aisp.kits.moe_schedule.device_route``
(the routing's stable counting sort, shared with chapter 17) writes on the device, so no host sync is needed.
The schedule's layout: aisp/kits/moe_schedule.py.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from ch19_grouped import store_tile, tile_dot
from optimized_fp8_moe_triton import BK, BM, BN, CONFIGS, launch

from aisp.kits.moe_schedule import sched_blocks, sched_tile


@triton.autotune(CONFIGS, key=["N", "K"])
@triton.jit
def _grouped_gemm_sched(a_desc, sa_ptr, b_desc, sb_ptr, c_ptr, sched_ptr, E1, N, K: tl.constexpr, programs,
                        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr = 8,
                        MAX_E: tl.constexpr = 64):
    """_grouped_gemm over the (2, E1) device schedule instead of a host-built table (E1 - 1 <= MAX_E experts)."""
    tile_end, blocks = sched_blocks(sched_ptr, E1, MAX_E)
    col_tiles = N // BN
    t = tl.program_id(0)
    while t < blocks * col_tiles:  # persistent; programs past the last tile exit
        e, row0, row1, col0 = sched_tile(t, blocks, col_tiles, tile_end, sched_ptr, E1, BM, BN, GROUP)
        store_tile(tile_dot(a_desc, b_desc, e, row0, col0, N, K, BM, BN, BK), sa_ptr, sb_ptr, c_ptr, e, row0,
                   row1, col0, N, BM, BN)
        t += programs


def grouped_gemm_sched(a: torch.Tensor, sa: torch.Tensor, b: torch.Tensor, sb: torch.Tensor, sched: torch.Tensor,
                       out_dtype: torch.dtype = torch.bfloat16, tile: tuple[int, int, int] = (BM, BN, BK)) -> torch.Tensor:
    """grouped_gemm over ``device_route``'s schedule (2, E + 1): one program per SM (autotuned), or 4 (``tile``)."""
    assert b.shape[0] <= 64 and sched.shape == (2, b.shape[0] + 1), "MAX_E experts at most, one schedule each"
    c = torch.empty(a.shape[0], b.shape[1], device=a.device, dtype=out_dtype)
    return launch(_grouped_gemm_sched, a, sa, b, sb, c, sched, (), tile)
