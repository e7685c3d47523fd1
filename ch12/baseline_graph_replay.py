"""Baseline graph replay (CUDA C++): a chain of 200 tiny dependent kernels, launched one by one.

Baseline: graph_replay.cu ``replay_eager``: 200 launches of ``affine_step`` (out = a * out + b over
4,096 floats, 16 blocks; the first reads the input), each queued by the host with its own
cudaLaunchKernel. Each kernel is ~2 us of GPU work; the host needs ~2-3 us per launch, so the GPU
waits on the launch path.
Optimized (optimized_graph_replay.py): the same 200 launches captured once into a cudaGraphExec
(setup), replayed with one cudaGraphLaunch per call: the GPU walks the graph's nodes itself.
Per-node cost against the measured 1.2 us per node of a PyTorch-captured graph on the H200: the
README divides each variant's time by 200.
Expect (measured, H200, 2026-11-23): 3.70x [3.56, 3.85] (0.774 -> 0.208 ms); 3.58 -> 0.98 us per
kernel.
Run: python ch12/baseline_graph_replay.py  |  aisp bench run -t ch12:graph_replay
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import torch
from ch12_common import (
    FLT,
    GRAPH_ENTRY_POINTS,
    INT,
    PTR,
    affine_chain_reference,
    library,
    microseconds_per_call,
)

import aisp
from aisp.kits import native


@dataclass(frozen=True, kw_only=True)
class ReplayWorkload(aisp.Workload):
    n: int = 4096
    steps: int = 200
    """Kernels in the chain."""
    a: float = 0.999
    b: float = 0.001


def _workload() -> ReplayWorkload:
    s = ReplayWorkload()
    # 200 dependent fp32 FMAs per element: ~1e-5 relative error against float64.
    # element_tol: 1e-4 absolute at max |out| ~3.1 (same kernels, the same math).
    # Latency: each affine_step but the first (which reads x) reads the out the one before it wrote.
    # Bytes: each of the 200 passes reads and writes the 16 KB vector, which L2 holds: link l2, not hbm.
    return ReplayWorkload(flops=2.0 * s.n * s.steps, bytes=8.0 * s.n * s.steps, link="l2", items=s.steps,
                          latency=aisp.LatencyCounts(graph_launches=1, graph_nodes=1, dependent_graph_nodes=s.steps - 1),
                          item_unit="kernels", precision="fp32", element_tol=3.2e-5, requires=native.REQUIRES,
                          ceiling_note="profiled (torch profiler, H200): 200 graph kernels of 1.0 us each (201 us a replay); "
                                       "_pdl's start early and wait: their spans overlap (3.79 ms summed)",
                          window="idle")


WORKLOAD = _workload()
LIBRARY = library("graph_replay")
SIGNATURES = {**GRAPH_ENTRY_POINTS, "replay_eager": [PTR, PTR, INT, INT, FLT, FLT, PTR],
              "replay_build": [PTR, PTR, INT, INT, FLT, FLT, ctypes.POINTER(PTR)],
              "replay_build_pdl": [PTR, PTR, INT, INT, FLT, FLT, INT, ctypes.POINTER(PTR)]}


class EagerChain(aisp.Benchmark):
    """out = the 200-step affine chain of x, one launch per step."""

    workload = WORKLOAD
    inputs = ("x",)
    scratch = ("out",)

    def setup(self) -> None:
        w = self.workload
        self.lib = LIBRARY.load(self.device, SIGNATURES)
        self.x = torch.randn(w.n, device=self.device, generator=self.generator())
        self.out = torch.empty_like(self.x)
        self.prepare()
        got = self.run().clone()
        ref = affine_chain_reference(self.x, [(w.a, w.b)] * w.steps)
        torch.testing.assert_close(got.double(), ref, rtol=1e-4, atol=1e-4)

    def prepare(self) -> None:
        """What a variant builds once before the first call."""

    def run(self) -> torch.Tensor:
        w = self.workload
        native.check(self.lib.replay_eager(self.x.data_ptr(), self.out.data_ptr(), w.n, w.steps, w.a, w.b,
                                           native.stream(self.device)), "replay_eager")
        return self.out

    def metrics(self) -> dict[str, float]:
        """Back-to-back time of a call per kernel of the chain: the cost of one node (or launch)."""
        return {"us_per_kernel": microseconds_per_call(self.run, self.device) / self.workload.steps}


def get_benchmark() -> aisp.Benchmark:
    return EagerChain()


if __name__ == "__main__":
    aisp.main(get_benchmark)
