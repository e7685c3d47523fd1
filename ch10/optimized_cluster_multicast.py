"""Optimized cluster multicast (CUDA C++): two blocks that need the same A tile form a cluster and
load it once, by TMA multicast.

Baseline (baseline_cluster_multicast.py): each block's producer warp TMA-loads its own A and W
tiles; neighbours along N load the same A tile twice.
Optimized: ``linear_tma<2>`` (cluster_multicast.cu) is launched with a cluster dimension of (2, 1, 1)
(``cudaLaunchKernelEx``), so blocks (2j, m) and (2j+1, m) run at once on one GPC. The producer
warp of block rank r loads rows 64r..64r+63 of the A tile with
``cp.async.bulk.tensor...multicast::cluster`` and mask 0b11: the copy engine writes the half into
the same offset of both blocks' shared memory and completes the bytes on both blocks' ``full[s]``
mbarrier, so each block's barrier still expects the whole 32 KB stage. Before a stage is refilled
both blocks must be done with it: each consumer warp arrives on ``empty[s]`` of both blocks
(``mapa`` + ``mbarrier.arrive.shared::cluster``, no fence), only the producer warp waits on it,
6 stages deep, and a final cluster barrier keeps a block's shared memory alive while its peer
still signals it. A crosses L2 -> SM once per pair: 48 instead of 64 KB per pair and K step.
Expect (estimate, not yet measured, for this kernel): ~1.0-1.2x, as far as L2 -> SM bandwidth
limits the baseline (at 1.62 ms its blocks drew ~5.3 TB/s from L2). The first kernel measured
0.64x (measured, H200, 2026-11-23: 1.62 -> 2.53 ms, 218 TFLOP/s): thread 0 was both the producer
and a consumer, so each K step warp 0 waited for all 16 warps of both blocks (remote arrives
included) before refilling, and the pair advanced in lockstep at compute + a cross-SM round trip
per step; and every remote arrive was spelled ``.release.cluster``, which ptxas compiles to a
``MEMBAR.ALL.GPU`` before it: two GPU-wide fences per warp and K step that the baseline's local
arrives did not pay. Both are gone (a producer warp; the CTA-scope arrive CUTLASS uses).
Run: python ch10/optimized_cluster_multicast.py  |  aisp bench run -t ch10:cluster_multicast
"""

from __future__ import annotations

from baseline_cluster_multicast import OwnCopyGemm

import aisp


class MulticastGemm(OwnCopyGemm):
    cluster = 2


def get_benchmark() -> aisp.Benchmark:
    return MulticastGemm()


if __name__ == "__main__":
    aisp.main(get_benchmark)
