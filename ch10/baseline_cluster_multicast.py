"""Baseline cluster multicast (CUDA C++): a TMA-fed mma.sync GEMM in which every block loads its
own copy of the A tile that its neighbour also reads.

Baseline: C = A @ W^T (a linear layer: A 8,192 x 4,096, W 8,192 x 4,096, bf16, fp32
accumulation; 550 GFLOP per call), ``linear_tma<1>`` in cluster_multicast.cu: 128 x 128 C tiles,
8 consumer warps of ``mma.sync`` m16n8k16 (SASS ``HMMA.16816.F32.BF16``) fed by ``ldmatrix`` from
128-byte-swizzled tiles that a ninth, producer warp brings by TMA (``UTMALDG.2D``) through a
6-stage mbarrier ring (192 KB of shared memory): only the producer waits for a stage to drain, the
consumers only for its bytes to land. Tiles go in grouped order (8 M tiles at a time) so that the
blocks resident at once share A and W tiles in L2. The two blocks computing C tiles (m, n) and
(m, n+1) read the same 128 x 64 A tile every K step, each through its own TMA load: per K step a
pair of blocks moves 2 x 16 KB of A and 2 x 16 KB of W from L2 into shared memory.
Optimized (optimized_cluster_multicast.py): the two blocks form a 2-block cluster; each loads one
half of the shared A tile with ``.multicast::cluster`` into both blocks' shared memory
(``UTMALDG.2D.MULTICAST``): 48 KB instead of 64 KB per pair and K step, a quarter less L2 -> SM
traffic, at the price of a cluster-wide handshake before a stage is refilled.
Same tiles and MMA order: the outputs should agree bit for bit.
Expect (measured, H200, 2026-11-26): 1.432 ms per call, 384 TFLOP/s, 49% of the 783 TFLOP/s bf16
peak (estimated ~1.4-1.6 ms; every sample taken while power-throttled, sw_power_cap). The producer
warp, 6 stages and grouped tile order took it from the first kernel's 1.62 ms (thread 0 both
producer and consumer, 4 stages, row-major order; measured, H200, 2026-11-23: 340 TFLOP/s, 43%).
It is bound by the mma.sync tensor-core issue rate, not by L2 -> SM bandwidth.
Run: python ch10/baseline_cluster_multicast.py  |  aisp bench run -t ch10:cluster_multicast
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch10b_common import HOPPER, INT, PTR, library

import aisp
from aisp.kits import native
from aisp.kits.native import ptr


@dataclass(frozen=True, kw_only=True)
class LinearWorkload(aisp.Workload):
    m: int = 8192
    n: int = 8192
    """A multiple of 256: cluster pairs of 128-wide tiles."""
    k: int = 4096


def _workload() -> LinearWorkload:
    s = LinearWorkload()
    return LinearWorkload(flops=2.0 * s.m * s.n * s.k, bytes=2.0 * (s.m * s.k + s.n * s.k + s.m * s.n), items=1,
                          item_unit="GEMMs", precision="bf16", requires=HOPPER)


WORKLOAD = _workload()
LIBRARY = library("cluster_multicast.cu", hopper_only=True)
"""Built for sm_90a: PTX advises .multicast::cluster for sm_90a only (it may be slow elsewhere)."""


class OwnCopyGemm(aisp.Benchmark):
    """C = A @ W^T, bf16 in and out."""

    workload = WORKLOAD
    inputs = ("a", "w")
    scratch = ("c",)
    cluster = 1
    """cluster_multicast.cu: 1 every block loads its own A tile, 2 two blocks share it by multicast."""

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        self.lib = LIBRARY.load(self.device, {"mc_gemm_run": [INT, PTR, PTR, PTR, INT, INT, INT, PTR]})
        self.a = torch.randn(w.m, w.k, generator=gen, device=self.device).bfloat16()
        self.w = torch.randn(w.n, w.k, generator=gen, device=self.device).bfloat16()
        self.c = torch.empty(w.m, w.n, device=self.device, dtype=torch.bfloat16)
        got, want = self.run().float(), (self.a @ self.w.T).float()
        error = float((got - want).norm() / want.norm())
        assert error < 1e-2, f"{type(self).__name__}: relative L2 error {error:.2e} against torch.matmul"

    def run(self) -> torch.Tensor:
        w = self.workload
        status = self.lib.mc_gemm_run(self.cluster, ptr(self.a), ptr(self.w), ptr(self.c), w.m, w.n, w.k,
                                      native.stream(self.device))
        native.check(status, type(self).__name__)
        return self.c


def get_benchmark() -> aisp.Benchmark:
    return OwnCopyGemm()


if __name__ == "__main__":
    aisp.main(get_benchmark)
