"""Optimized fp8 MoE, Triton variant: both expert layers as one persistent grouped fp8 GEMM each.

Baseline (baseline_fp8_moe.py): bf16 expert GEMMs over tokens sorted by expert.
Optimized: the same routing, row-wise quantization and e4m3 weights with per-channel scales as
optimized_fp8_moe.py (kept as the measured reference: 7.788 ms, 39% of the fp8 peak, 16 row-wise
``_scaled_mm`` calls, the GEMMs at ~620 TFLOP/s), but each layer is one Triton kernel over all 8
experts: a tile table lists every 128-row block of every expert's slice of the sorted tokens (built on
the host from the counts routing already copies there; no padding, a block ends where its expert's rows
end), and 132 resident programs, one per SM, walk the (block, column tile) pairs grouped by 8 row
blocks, so the ~130 tiles in flight share 8 row blocks (4 MB) and ~16 column tiles of one expert's
weights (1 MB each) in L2. Per tile: a 128 x 256 fp32 accumulator over K in 128-deep steps of fp8
wgmma (both operands K-major in shared memory), fed by TMA (one bulk copy per operand per step; rows
past the tensor come back zero), 3-4 stages of 48 KB, 8 warps, 184 registers; the epilogue applies
the row and channel scales and stores bf16 for the block's expert's rows only. Two configs (3 or 4
stages) are autotuned per layer shape in the untimed warm-up.
Expect (measured, H200, 2026-11-27): 8.660 -> 6.929 ms, 1.25x [1.22, 1.27], 634.7 TFLOP/s counting the
passes around the GEMMs, 44% of the fp8 peak: the pair's best, 1.06x the _scaled_mm variant (7.327
ms); the GEMMs run near the fp8 peak, the passes around them take the rest (README, profiled).
Run: python ch19/optimized_fp8_moe_triton.py  |  aisp bench run -t ch19:fp8_moe
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import triton
import triton.language as tl
from baseline_fp8_moe import combine, route
from ch19_fp8 import E4M3
from ch19_grouped import store_tile, tile_dot, tile_of
from optimized_fp8_moe import Fp8ExpertLoop, gelu_quantize_rows, quantize_rows
from triton.tools.tensor_descriptor import TensorDescriptor

import aisp
from aisp.kits.moe_schedule import launch_persistent

BM, BN, BK = 128, 256, 128
CONFIGS = [triton.Config({}, num_warps=8, num_stages=3),  # 144 KB of shared memory
           triton.Config({}, num_warps=8, num_stages=4)]  # 192 KB
"""One program per SM, 128 x 256 x 128 tiles (the TMA boxes' size); 2 candidates x 2 layer shapes: 4 compiles."""


@triton.autotune(CONFIGS, key=["N", "K"])
@triton.jit(do_not_specialize=["blocks"])  # varies with routing: no recompile when it turns a multiple of 16
def _grouped_gemm(a_desc, sa_ptr, b_desc, sb_ptr, c_ptr, table_ptr, blocks, N, K: tl.constexpr, programs,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr = 8):
    """c[r, n] = sa[r] * sb[e, n] * sum_k a[r, k] b[e, n, k] for the rows r of each block (expert e).
    a (rows, K) and b (E * N, K) are read through TMA descriptors (rows past the end come back zero)."""
    pid = tl.program_id(0)
    col_tiles = N // BN
    t = pid
    while t < blocks * col_tiles:  # persistent: tiles pid, pid + programs, ...
        e, row0, row1, col0 = tile_of(t, blocks, col_tiles, table_ptr, BN, GROUP)
        store_tile(tile_dot(a_desc, b_desc, e, row0, col0, N, K, BM, BN, BK), sa_ptr, sb_ptr, c_ptr, e, row0,
                   row1, col0, N, BM, BN)
        t += programs


def tile_table(counts: list[int], device: torch.device, bm: int = BM) -> torch.Tensor:
    """int32 (3, blocks): expert, first row and end row of every ``bm``-row block of each expert's rows
    (one small host-to-device copy per call, shared by both layers)."""
    table, start = [], 0
    for e, c in enumerate(counts):
        table += [(e, r, start + c) for r in range(start, start + c, bm)]
        start += c
    return torch.tensor(table, dtype=torch.int32).t().contiguous().to(device)


def grouped_gemm(a: torch.Tensor, sa: torch.Tensor, b: torch.Tensor, sb: torch.Tensor, table: torch.Tensor,
                 out_dtype: torch.dtype = torch.bfloat16, tile: tuple[int, int, int] = (BM, BN, BK)) -> torch.Tensor:
    """Row-wise scaled ``a[rows of e] @ b[e]^T`` for each expert e (a: (rows, K), sa: (rows,), b: (E, N, K),
    sb: (E, N)) over the blocks of ``tile_table(counts, tile[0])``; another ``tile``: CPU tests (interpreter)."""
    c = torch.empty(a.shape[0], b.shape[1], device=a.device, dtype=out_dtype)
    return launch(_grouped_gemm, a, sa, b, sb, c, table, (), tile)


def launch(kernel, a: torch.Tensor, sa: torch.Tensor, b: torch.Tensor, sb: torch.Tensor, out: torch.Tensor,
           table: torch.Tensor, extra: tuple, tile: tuple[int, int, int]) -> torch.Tensor:
    """``kernel(a, sa, b, sb, out, table, *extra, blocks, N, K)``: one program per SM (autotuned) or 4 (``tile``)."""
    k, (e, n, _), (bm, bn, bk) = a.shape[1], b.shape, tile
    a_desc = TensorDescriptor.from_tensor(a, [bm, bk])
    b_desc = TensorDescriptor.from_tensor(b.reshape(e * n, k), [bn, bk])
    args = (a_desc, sa, b_desc, sb, out, table, *extra, table.shape[1], n, k)
    launch_persistent(kernel, args, tile, (BM, BN, BK), a.device)
    return out


class Fp8GroupedTriton(Fp8ExpertLoop):
    def prepare(self) -> None:
        """Untimed: e4m3 weights (E, N, K) with (E, N) channel scales; compile; autotune in the warm-up call."""
        self.up, self.down = (tuple(map(torch.stack, zip(*(quantize_rows(w) for w in ws), strict=True)))
                              for ws in (self.w_up, self.w_down))
        self.up, self.down = ((q.view(torch.uint8), s[..., 0].contiguous()) for q, s in (self.up, self.down))
        cuda = self.device.type == "cuda"
        self.quantize: Callable = torch.compile(quantize_rows) if cuda else quantize_rows
        self.gelu_quantize: Callable = torch.compile(gelu_quantize_rows) if cuda else gelu_quantize_rows
        self.run()

    def layer(self, q: torch.Tensor, scale: torch.Tensor, counts: list[int], table: torch.Tensor,
              w: tuple[torch.Tensor, ...]) -> torch.Tensor:
        if q.is_cuda:  # weights kept as uint8 views (pitfall 7)
            return grouped_gemm(q, scale.reshape(-1), w[0].view(E4M3), w[1], table)
        outs = [(r.float() @ w[0][e].view(E4M3).float().t()) * s * w[1][e] for e, (r, s) in
                enumerate(zip(torch.split(q, counts), torch.split(scale, counts), strict=True))]
        return torch.cat(outs).bfloat16()  # the kernel's arithmetic, in torch (CPU tests)

    def experts(self, xs: torch.Tensor, counts: list[int]) -> torch.Tensor:
        table = tile_table(counts, xs.device)
        x8, sx = self.quantize(xs)
        h8, sh = self.gelu_quantize(self.layer(x8, sx, counts, table, self.up))
        return self.layer(h8, sh, counts, table, self.down)

    def run(self) -> torch.Tensor:
        token, gate, counts = route(self.x, self.router, self.workload.top_k)
        return combine(self.experts(self.x[token], counts), token, gate, self.workload.tokens)


def get_benchmark() -> aisp.Benchmark:
    return Fp8GroupedTriton()


if __name__ == "__main__":
    aisp.main(get_benchmark)
