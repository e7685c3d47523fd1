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
Expect (measured, H200, 2026-11-26): still SLOWER: 1.432 -> 1.493 ms, 0.96x [0.95, 0.98], 368
TFLOP/s (47% of 783; estimated ~1.0-1.2x). The baseline's producer-warp kernel itself improved
(1.62 -> 1.43 ms), and this mma.sync kernel is bound by its tensor-core issue rate, not by L2 -> SM
bandwidth: halving the A tile's L2 traffic buys nothing while the cluster's cross-SM handshakes
cost ~4%. Multicast can pay only in a kernel that L2 -> SM traffic binds. The first kernel measured
0.64x (measured, H200, 2026-11-23: 1.62 -> 2.53 ms): thread 0 was both producer and consumer, and
each remote arrive (``.release.cluster``) compiled to a ``MEMBAR.ALL.GPU``; both are gone here.
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
