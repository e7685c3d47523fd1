"""MoE routing and a grouped GEMM's tile schedule on the device, shared by chapter 17's bf16 grouped GEMM
(optimized_moe_grouped_gemm_fused_swiglu.py) and chapter 19's fp8 one (optimized_fp8_moe_device_schedule.py):
a stable counting sort of the (token, expert) assignments by expert that also writes the tile schedule, and
the persistent walk's tile read from it, so neither the sort nor the tile table needs a host sync.

Schedule (int32, (2, E + 1)): ``[[row_start[0..E-1], rows], [tile_start[0..E-1], blocks]]``: expert e's rows
are ``row_start[e]:row_start[e + 1]`` of the sorted assignments, its BM-row blocks are
``tile_start[e]:tile_start[e + 1]`` (an exclusive cumsum of ``ceil(count / BM)``; an empty expert has none).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

CHUNK = 1024
"""Assignments per routing program: 32 programs for the pair's 32,768."""


@triton.jit
def _count(expert_ptr, part_ptr, ROWS, EP2: tl.constexpr, CHUNK: tl.constexpr):
    """part[p, e]: how many of assignments [p * CHUNK, (p + 1) * CHUNK) go to expert e."""
    p, e = tl.program_id(0), tl.arange(0, EP2)
    r = p * CHUNK + tl.arange(0, CHUNK)
    x = tl.load(expert_ptr + r, mask=r < ROWS, other=-1)
    tl.store(part_ptr + p * EP2 + e, tl.sum((x[:, None] == e[None, :]).to(tl.int32), axis=0))


@triton.jit
def _sort(expert_ptr, gate_ptr, part_ptr, order_ptr, sgate_ptr, sched_ptr, ROWS, E: tl.constexpr,
          EP2: tl.constexpr, CHUNK: tl.constexpr, PARTS: tl.constexpr, BM: tl.constexpr):
    """Stable counting sort by expert: ``order[dest] = r``, ``sgate[dest] = gate[r]``; program 0 writes the
    schedule [row start of each expert, rows; first block of each expert, blocks] ((2, E + 1) int32)."""
    p, e, q = tl.program_id(0), tl.arange(0, EP2), tl.arange(0, PARTS)
    part = tl.load(part_ptr + q[:, None] * EP2 + e[None, :], mask=q[:, None] < tl.num_programs(0), other=0)
    counts, before = tl.sum(part, axis=0), tl.sum(tl.where(q[:, None] < p, part, 0), axis=0)
    row_start = tl.cumsum(counts, axis=0) - counts
    r = p * CHUNK + tl.arange(0, CHUNK)
    x = tl.load(expert_ptr + r, mask=r < ROWS, other=-1)
    hot = (x[:, None] == e[None, :]).to(tl.int32)  # (CHUNK, EP2): one 1 per row
    dest = tl.sum(hot * (tl.cumsum(hot, axis=0) - hot + (row_start + before)[None, :]), axis=1)
    tl.store(order_ptr + dest, r, mask=r < ROWS)
    tl.store(sgate_ptr + dest, tl.load(gate_ptr + r, mask=r < ROWS, other=0.0), mask=r < ROWS)
    if p == 0:
        tiles = (counts + BM - 1) // BM
        tl.store(sched_ptr + e, row_start, mask=e < E)
        tl.store(sched_ptr + E + 1 + e, tl.cumsum(tiles, axis=0) - tiles, mask=e < E)
        tl.store(sched_ptr + E, tl.sum(counts, axis=0))
        tl.store(sched_ptr + 2 * E + 1, tl.sum(tiles, axis=0))


def device_route(experts: torch.Tensor, gates: torch.Tensor, n_experts: int, bm: int = 128, chunk: int = CHUNK
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(int32 order = ``argsort(experts, stable=True)``, ``gates[order]``, int32 schedule (2, E + 1)), on the device."""
    rows, ep2, parts = experts.numel(), triton.next_power_of_2(n_experts), triton.cdiv(experts.numel(), chunk)
    part = torch.empty(parts, ep2, device=experts.device, dtype=torch.int32)
    order = torch.empty(rows, device=experts.device, dtype=torch.int32)
    sgate = torch.empty(rows, device=experts.device, dtype=gates.dtype)
    sched = torch.empty(2 * n_experts + 2, device=experts.device, dtype=torch.int32)
    _count[(parts,)](experts, part, rows, EP2=ep2, CHUNK=chunk, num_warps=4)
    _sort[(parts,)](experts, gates, part, order, sgate, sched, rows, E=n_experts, EP2=ep2, CHUNK=chunk,
                    PARTS=triton.next_power_of_2(parts), BM=bm, num_warps=4)
    return order, sgate, sched.view(2, n_experts + 1)


@triton.jit
def sched_blocks(sched_ptr, E1, MAX_E: tl.constexpr):
    """(each expert's end block, padded with int32 max to MAX_E: ``sched_tile``'s ``tile_end``; the
    schedule's row blocks in all) read from the (2, E1) schedule of E1 - 1 <= MAX_E experts."""
    i = tl.arange(0, MAX_E)
    tile_end = tl.load(sched_ptr + E1 + 1 + i, mask=i < E1 - 1, other=2147483647)
    return tile_end, tl.load(sched_ptr + 2 * E1 - 1)


@triton.jit
def sched_tile(t, blocks, col_tiles, tile_end, sched_ptr, E1, BM: tl.constexpr, BN: tl.constexpr, GROUP: tl.constexpr):
    """Tile t of the walk (tile_of's order, GROUP row blocks per column tile) over the schedule of E1 - 1
    experts: expert, first row, end row, first column; the expert: how many experts' blocks end at or
    before the tile's block (``tile_end``: each expert's end block, padded with int32 max)."""
    first = t // (GROUP * col_tiles) * GROUP
    size = tl.minimum(blocks - first, GROUP)
    block, col0 = first + t % (GROUP * col_tiles) % size, t % (GROUP * col_tiles) // size * BN
    e = tl.sum((tile_end <= block).to(tl.int32), axis=0)
    row0 = tl.load(sched_ptr + e) + (block - tl.load(sched_ptr + E1 + e)) * BM
    return e, row0, tl.load(sched_ptr + e + 1), col0


def schedule(counts: torch.Tensor, bm: int = 128) -> torch.Tensor:
    """``device_route``'s schedule (int32, (2, E + 1)) from each expert's assignment count, by torch ops on the
    counts' device (no host sync; any number of experts): row starts (cumsum of the counts), then first
    ``bm``-row blocks (cumsum of ``ceil(count / bm)``), each with its total last."""
    zero = counts.new_zeros(1)
    tiles = (counts + bm - 1) // bm
    return torch.stack([torch.cat([zero, counts.cumsum(0)]), torch.cat([zero, tiles.cumsum(0)])]).to(torch.int32)


def launch_persistent(kernel, args: tuple, tile: tuple[int, int, int], autotuned: tuple[int, int, int],
                      device: torch.device) -> None:
    """A persistent grouped-GEMM ``kernel(*args, programs, BM, BN, BK)``: at its ``autotuned`` tile one
    program per SM over the autotuned configs; at any other ``tile`` (the CPU interpreter tests) the
    kernel's function alone, 4 programs."""
    bm, bn, bk = tile
    if tile != autotuned:
        kernel.fn[(4,)](*args, 4, BM=bm, BN=bn, BK=bk)
    else:
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        kernel[(sms,)](*args, sms, BM=bm, BN=bn, BK=bk)
