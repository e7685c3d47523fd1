"""Optimized w4a16, bulk variant (CUDA C++): the tiled kernel with each warp's half-step (2 KB, contiguous in
the tiled format) moved by one TMA bulk copy instead of 128 per-lane 16-byte cp.async.

Baseline (baseline_w4a16_gemm.py): decode all weights to a bf16 copy (1.07 GB written), then GEMM.
Optimized: w4a16_stream.cu's kernel on ch19_w4.tile_w4's format (optimized_w4a16_gemm_tiled.py, the pair's
best: 0.0885-0.0900 ms, 73-74% of the HBM copy ceiling), its kBulk instantiation. Profiled (README, example
4), the tiled kernel's L2 is its busiest unit (82.6%) and moves 2.1x its DRAM bytes (6,715 vs 3,201 GB/s),
while the baseline's cuBLAS GEMM, a TMA kernel, streams at 88% of DRAM with 1.56x. The tiled kernel's
copies are LDGSTS.BYPASS.LTC256B: 16 bytes a lane through the L1 path, each with an L2 256-byte prefetch
hint, redundant in a format whose warp copy reads 512 aligned contiguous bytes. Here lane 0 of each warp
issues cp.async.bulk (UBLKCP) of the half's 2 KB into the warp's slots, armed on one of the warp's two
mbarriers (expect_tx 2048 bytes); the lanes wait on its phase (parity flips once a step) and read the
same 16 bytes into the same registers as before. Same bytes (278 MB), same bytes in flight (64 KB a SM,
a step ahead), same decode, mma, x staging, split-K 4 x 33 CTAs, in-kernel sum and one launch; the loop
is 571 SASS instructions a step (528), 126 registers, no spills.
Expect: not yet measured. Estimate (arithmetic, not a measurement): if the L2's excess over cuBLAS's
ratio (2.1x vs 1.56x) is the per-lane copies and their prefetch hint, the L2 at the same ~82% carries
3.6-4.0 TB/s of DRAM reads: 0.074-0.083 ms, 80-90% of the copy ceiling (80% is 0.0824 ms); if the excess
is Hopper's two L2 halves (as cuBLAS's 1.56x is), a tie with tiled (0.089 ms).
Run: python ch19/optimized_w4a16_gemm_bulk.py  |  aisp bench run -t ch19:w4a16_gemm
"""

from __future__ import annotations

import functools

import torch
from optimized_w4a16_gemm_stream import emulate, stream_matmul
from optimized_w4a16_gemm_tiled import TiledW4A16
from optimized_w4a16_gemm_tiled import w4a16_matmul as tiled_w4a16_matmul

import aisp

GEMM, EMULATE = "w4a16_bulk_gemm", "w4a16_bulk_emulate"
bulk_matmul = functools.partial(stream_matmul, entry=GEMM)
"""(lib, plan, x, packed, scale): ``x @ w^T`` (bf16) from tile_w4's bytes and scales, on x's GPU (sm_90) and stream."""
bulk_emulate = functools.partial(emulate, entry=EMULATE)
"""The same product by the kernel's CPU emulation (CPU tensors): each half copied whole, read back by slot."""


def w4a16_matmul(x: torch.Tensor, packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``x @ w^T`` from ch19_w4's row-major format (tiled each call: for tests, not for timing)."""
    return tiled_w4a16_matmul(x, packed, scale, GEMM)


class BulkW4A16(TiledW4A16):
    def run(self) -> torch.Tensor:
        return bulk_matmul(self.lib, self.plan, self.x, self.packed, self.scale)


def get_benchmark() -> aisp.Benchmark:
    return BulkW4A16()


if __name__ == "__main__":
    aisp.main(get_benchmark)
