"""Optimized noncontiguous views, narrow: the cluster kernel with half its columns a cluster, six blocks an SM.

Baseline (baseline_noncontiguous_views.py): softmax, log_softmax and layer_norm on ``x.t()``; each
op copies the strided view into a contiguous buffer first: three hidden copies, five kernels.
Optimized (optimized_noncontiguous_views_cluster.py, the pair's best): x read once, each 16-column
block of x split over a cluster of 8 blocks (1,024 rows, a 64 KiB tile each, three blocks an SM);
Nsight Compute (H200): 171 us, DRAM 62%, occupancy 33%. A block asks HBM for its whole tile at its
start, then reduces it, waits at the cluster barrier for the slowest of its 8 blocks, merges and
stores: it loads once in its ~16.5 us life, and with three an SM there are stretches where no block
on the SM is loading. The TMA variant kept that life and removed the barrier's fence: 1.4%.
Optimized (this file): ``views_rows_narrow`` (views_cluster.cu) gives a cluster 8 columns of x (32
bytes a row: one whole sector) instead of 16, so a block's tile is its 1,024 rows x 32 bytes (32
KiB) and 128 threads, two warps a 16-byte chunk as before: six blocks an SM, the same 24 warps,
each thread the same 16 rows a pass. Twice the blocks, each asking for half the bytes, so a load
starts on an SM twice as often and more of the stats, barrier waits and stores have a load beside
them. The body is the cluster kernel's (one template, ``rows_cluster<2>``; its SASS is unchanged),
so a column's partials, merge and outputs take the same steps: bitwise the cluster kernel's output
(a GPU test checks ``torch.equal``). Bytes: the same 8 per element, one launch.
Estimate (arithmetic, not a measurement): per SM, three blocks of 128 KiB each need 4.1 us of the
SM's share of the HBM copy (31 KiB/us) and live 16.5 us, so ~12 us of each life is not DRAM time;
if that stays a block's life here (each thread's work is unchanged) while its bytes halve, six
blocks move 384 KiB per ~14.5 us: ~85% of the copy, 0.150 ms; 0.145-0.160 ms (80-88%) allowing
for DRAM then limiting. If what holds DRAM at 62% is instead the read pattern (pieces of rows 32
KiB apart, now 32 bytes not 64), it gains nothing or loses.
Expect: not yet measured on a GPU.
Run: python ch07/optimized_noncontiguous_views_narrow.py  |  aisp bench run -t ch07:noncontiguous_views
"""

from __future__ import annotations

import ctypes

import torch
from ch07_common import INT, LONG, PTR
from optimized_noncontiguous_views_cluster import LIBRARY, ClusterStridedFeatures

import aisp
from aisp.kits import native
from aisp.kits.native import ptr

SIGNATURES = {"views_rows_narrow_run": [PTR, PTR, LONG, INT, INT, PTR]}


def narrow_row_features(lib: ctypes.CDLL, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``row_features(x.t())`` into ``out`` (shape x.t().shape, contiguous), x read once, 8 columns a
    cluster. The cluster kernel's contract: x 2-D fp32, unit column stride, rows a multiple of 512 up
    to 8,192, columns a multiple of 16, 16-byte aligned (status -1 before launching otherwise)."""
    rows, cols = x.shape
    assert x.dtype == out.dtype == torch.float32 and x.stride(1) == 1 and out.is_contiguous()
    assert out.shape == (cols, rows) and x.device == out.device
    status = lib.views_rows_narrow_run(ptr(x), ptr(out), x.stride(0), rows, cols, native.stream(x.device))
    native.check(status, "views_rows_narrow_run")
    return out


class NarrowStridedFeatures(ClusterStridedFeatures):
    def setup(self) -> None:
        super().setup()
        self.lib = LIBRARY.load(self.device, SIGNATURES)

    def run(self) -> torch.Tensor:
        return narrow_row_features(self.lib, self.x, self.out)


def get_benchmark() -> aisp.Benchmark:
    return NarrowStridedFeatures()


if __name__ == "__main__":
    aisp.main(get_benchmark)
