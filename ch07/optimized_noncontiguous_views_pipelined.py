"""Optimized noncontiguous views, pipelined: the cluster kernel's work from a persistent grid that keeps
HBM busy (CUDA C++, Hopper).

Baseline (baseline_noncontiguous_views.py): softmax, log_softmax and layer_norm on ``x.t()``; each
op copies the strided view into a contiguous buffer first: three hidden copies, five kernels.
Optimized (optimized_noncontiguous_views_cluster.py): x read once, each 16-column block of x split
over a cluster of 8 blocks (1,024 rows each), partials merged through distributed shared memory.
Measured 0.1749 / 0.1726 ms, 73-74% of the HBM copy; Nsight Compute: DRAM 62.1%, stalls
long_scoreboard 2.94, barrier 2.48 and membar 1.51: each of its 4,096 blocks loads its tile, waits,
reduces, meets its cluster at a barrier whose release is a ``MEMBAR.ALL.GPU``, then stores, so an
SM's loads come in bursts between a block's launch and its stores.
Optimized (this file): ``views_rows_pipelined`` (views_cluster.cu), same bytes (8 per element, one
launch) and the same math in fp32. One 512-thread block an SM and as many clusters as fit at once
(``cudaOccupancyMaxActiveClusters``, asked once; 16 on 128 SMs deal out the 512 tiles 32 each); each
block walks its cluster's tiles through three 64 KiB shared-memory stages of cp.async, so two tiles
are in flight while a third is computed, and holds its 1,024 x 16 slice in registers once loaded
(32 floats a thread), so the stage is refilled at once. The 8 partials of a tile are pushed to every
block of the cluster with ``st.async`` onto an mbarrier (2 KiB a block, double-buffered): no
cluster barrier and no memory fence a tile, where the cluster kernel had two barriers and a fence.
Expect: not yet measured. Estimate (arithmetic, not a measurement): 0.537 GB at 3.3-3.7 TB/s of
mixed reads and writes plus ~5 us of start and drain = 0.150-0.170 ms, 75-85% of the HBM copy;
issue per SM ~2-3 us a tile (about 1,000 instructions a warp, 16 warps) under the 4-5 us its
128 KiB of loads and stores take, so HBM, not the SM, should set the pace.
Run: python ch07/optimized_noncontiguous_views_pipelined.py  |  aisp bench run -t ch07:noncontiguous_views
"""

from __future__ import annotations

import torch
from optimized_noncontiguous_views_cluster import ClusterStridedFeatures, cluster_row_features

import aisp


class PipelinedStridedFeatures(ClusterStridedFeatures):
    def run(self) -> torch.Tensor:
        return cluster_row_features(self.lib, self.x, self.out, "views_pipelined_run")


def get_benchmark() -> aisp.Benchmark:
    return PipelinedStridedFeatures()


if __name__ == "__main__":
    aisp.main(get_benchmark)
