"""Baseline cluster multicast (CUDA C++): the ladder's warp-specialized TMA + wgmma GEMM, in which
two blocks that read the same B tile each load their own copy.

Baseline: C = A @ B^T (8,192^3 bf16, fp32 accumulation; 1.1 TFLOP per call), ``gemm_mc<1>`` in
cluster_multicast.cu: gemm_ws.cu's kernel (93% of the bf16 peak on the ladder): 384 threads per
128 x 256 C tile, a producer warpgroup whose one thread TMA-loads (``UTMALDG.2D``) into a 4-stage
ring of 48 KB stages tracked by full/empty mbarriers, two consumer warpgroups of
``wgmma.mma_async`` m64n256k16 (SASS ``HGMMA.64x256x16.F32.BF16``), ``setmaxnreg`` 40/232.
Blocks 2j and 2j+1 compute vertically adjacent tiles (2i, n) and (2i+1, n) in grouped order, so
they read the same 256 x 64 B tile every K step, each through its own loads: per pair and K step
2 x (16 KB of A + 32 KB of B) = 96 KB cross from L2 to the SMs, 85 FLOP per byte; at ~730 TFLOP/s
that is ~8.6 TB/s of L2 -> SM traffic, a large share of what H100/H200's L2 delivers.
Optimized (optimized_cluster_multicast.py): the pair is a 2-block cluster and each block loads one
half of the shared B tile with ``.multicast::cluster`` into both blocks' shared memory
(``UTMALDG.2D.MULTICAST``): 64 instead of 96 KB per pair and K step, the shared operand's L2 bytes
per FLOP halved (128 FLOP per byte overall), for a cluster-wide release of every stage.
Same tiles, data and wgmma order: the outputs agree bit for bit.
Expect (measured, H200, 2026-11-27): 1.475 ms, 745.6 TFLOP/s, 95% of the 783 TFLOP/s bf16 peak
(estimated ~1.50 ms, ~93%); the multicast kernel 1.471 ms, 1.00x [1.00, 1.00]: parity. At 95% of peak
this kernel leaves no room for halving the B tile's L2 -> SM traffic to show. (The earlier mma.sync
version of the pair measured 0.96x, at 49% of peak.)
Run: python ch10/baseline_cluster_multicast.py  |  aisp bench run -t ch10:cluster_multicast
"""

from __future__ import annotations

import torch
from ch10b_common import HOPPER, INT, PTR, MatmulWorkload, library

import aisp
from aisp.kits import native
from aisp.kits.native import ptr


def _workload(m: int = 8192, n: int = 8192, k: int = 8192) -> MatmulWorkload:
    """m and n multiples of 256 (pairs of 128-row tiles; 256-wide tiles), k of 64."""
    return MatmulWorkload(m=m, n=n, k=k, flops=2.0 * m * n * k, bytes=2.0 * (m * k + n * k + m * n), items=1,
                          item_unit="GEMMs", precision="bf16", requires=HOPPER)


WORKLOAD = _workload()
LIBRARY = library("cluster_multicast.cu", hopper_only=True)
"""Built for sm_90a: wgmma and setmaxnreg exist only there (PTX advises .multicast::cluster for it too)."""


class OwnCopyGemm(aisp.Benchmark):
    """C = A @ B^T, bf16 in and out (B as nn.Linear stores its weight)."""

    workload = WORKLOAD
    inputs = ("a", "b")
    scratch = ("c",)
    cluster = 1
    """cluster_multicast.cu: 1 every block loads its own B tile, 2 two blocks share it by multicast."""

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        self.lib = LIBRARY.load(self.device, {"mc_gemm_run": [INT, PTR, PTR, PTR, INT, INT, INT, PTR]})
        self.a = torch.randn(w.m, w.k, generator=gen, device=self.device).bfloat16()
        self.b = torch.randn(w.n, w.k, generator=gen, device=self.device).bfloat16()
        self.c = torch.empty(w.m, w.n, device=self.device, dtype=torch.bfloat16)
        got, want = self.run().float(), (self.a @ self.b.T).float()
        error = float((got - want).norm() / want.norm())
        assert error < 1e-2, f"{type(self).__name__}: relative L2 error {error:.2e} against torch.matmul"

    def run(self) -> torch.Tensor:
        w = self.workload
        status = self.lib.mc_gemm_run(self.cluster, ptr(self.a), ptr(self.b), ptr(self.c), w.m, w.n, w.k,
                                      native.stream(self.device))
        native.check(status, type(self).__name__)
        return self.c


def get_benchmark() -> aisp.Benchmark:
    return OwnCopyGemm()


if __name__ == "__main__":
    aisp.main(get_benchmark)
