"""Optimized grouped GEMM: all 64 experts' products in one persistent Triton kernel.

Baseline (baseline_triton_grouped_gemm.py): a Python loop of 64 ``torch.mm`` calls, each one
half-empty wave on the GPU.
Optimized: setup() turns the (fixed) group sizes into a table of 128-row blocks (expert, first
row, end row), as an MoE layer does once per routing. The kernel launches one program per SM;
program p takes tiles p, p + 132, ... of the 2,608 (row block, 128-column block) tiles of all
experts, so the SMs stay busy across expert boundaries and the last wave is shared. Rows past a
block's end are masked (bands are not multiples of 128). Neighbouring tiles share an expert, so
its 8 MiB weight matrix is read from HBM about once and served from L2.
Expect: H200, measured: 3.07x [2.87, 3.29], 1.128 -> 0.370 ms, 385 TFLOP/s: 49% of the bf16
tensor-core ceiling (a pointer-based Triton GEMM without TMA; not profiled).
Run: python ch14/optimized_triton_grouped_gemm.py  |  aisp bench run -t ch14:triton_grouped_gemm
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from baseline_triton_grouped_gemm import LoopedGroupGemm

import aisp


@dataclass(frozen=True)
class Tiling:
    bm: int = 128
    bn: int = 128
    bk: int = 64
    warps: int = 8
    stages: int = 4


@triton.jit
def _grouped_gemm(a_ptr, b_ptr, c_ptr, blk_group, blk_start, blk_end, tiles, N, K: tl.constexpr,
                  ROUNDS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                  PROGRAMS: tl.constexpr):
    # K and the round count are compile-time constants: fixed per workload, and the Triton
    # interpreter (CPU tests) cannot take a runtime loop bound
    tiles_n = N // BN
    ks = tl.arange(0, BK)
    for i in range(0, ROUNDS):  # tiles pid, pid + PROGRAMS, ...: persistent over all experts
        tile = tl.program_id(0) + i * PROGRAMS
        mb = tl.minimum(tile // tiles_n, tiles // tiles_n - 1)
        g = tl.load(blk_group + mb).to(tl.int64)
        rows = tl.load(blk_start + mb) + tl.arange(0, BM)
        row_ok = (rows < tl.load(blk_end + mb)) & (tile < tiles)
        cols = (tile % tiles_n) * BN + tl.arange(0, BN)
        a_ptrs = a_ptr + rows[:, None].to(tl.int64) * K + ks[None, :]
        b_ptrs = b_ptr + g * K * N + ks[:, None] * N + cols[None, :]
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for _ in range(0, K, BK):
            a = tl.load(a_ptrs, mask=row_ok[:, None], other=0.0)
            acc = tl.dot(a, tl.load(b_ptrs), acc)
            a_ptrs += BK
            b_ptrs += BK * N
        c_ptrs = c_ptr + rows[:, None].to(tl.int64) * N + cols[None, :]
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=row_ok[:, None])


def block_table(rows: list[int], bm: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    """(expert, first row, end row) of every bm-row block of every expert's band, as int32."""
    group, start, end, first = [], [], [], 0
    for g, n in enumerate(rows):
        for r in range(first, first + n, bm):
            group.append(g)
            start.append(r)
            end.append(first + n)
        first += n
    return tuple(torch.tensor(v, dtype=torch.int32, device=device) for v in (group, start, end))


def grouped_mm(a: torch.Tensor, b: torch.Tensor, table: tuple[torch.Tensor, ...], out: torch.Tensor,
               programs: int, tiling: Tiling = Tiling()) -> torch.Tensor:
    """out[band g] = a[band g] @ b[g] for every expert band listed in ``table`` (block_table)."""
    _, k, n = b.shape
    if k % tiling.bk or n % tiling.bn:
        raise ValueError(f"K={k} and N={n} must be multiples of {tiling.bk} and {tiling.bn}")
    tiles = table[0].numel() * (n // tiling.bn)
    programs = min(programs, tiles)
    _grouped_gemm[(programs,)](a, b, out, *table, tiles, n, K=k, ROUNDS=triton.cdiv(tiles, programs),
                               BM=tiling.bm, BN=tiling.bn, BK=tiling.bk,
                               PROGRAMS=programs, num_warps=tiling.warps, num_stages=tiling.stages)
    return out


class PersistentGroupGemm(LoopedGroupGemm):
    def setup(self) -> None:
        super().setup()
        self.table = block_table(self.rows, Tiling().bm, self.device)
        self.programs = torch.cuda.get_device_properties(self.device).multi_processor_count

    def run(self) -> torch.Tensor:
        return grouped_mm(self.a, self.b, self.table, self.out, self.programs)


def get_benchmark() -> aisp.Benchmark:
    return PersistentGroupGemm()


if __name__ == "__main__":
    aisp.main(get_benchmark)
