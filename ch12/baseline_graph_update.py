"""Baseline graph update (CUDA C++): a graph re-captured and re-instantiated whenever an argument changes.

A denoising-style loop: 8 steps per call, each one launch of a 16-kernel chain (out = a * out + c_t
over 4,096 floats) whose scalar c_t changes from step to step, as a timestep does in a sampler.
Baseline: graph_update.cu ``update_recapture``: per step, capture the 16 launches with the new c_t,
cudaGraphInstantiate, launch, destroy. Instantiation (tens of us) is paid 8 times per call.
Optimized: optimized_graph_update.py sets c_t in the one instantiated graph's 16 kernel nodes with
cudaGraphExecKernelNodeSetParams (no capture, no instantiation); optimized_graph_update_exec_update.py
still captures per step but applies it with cudaGraphExecUpdate instead of instantiating.
Per-node cost: the README divides each time by the 128 kernels of a call (1.2 us per node on the H200).
Expect (measured, H200, 2026-11-23): 2.52x by medians with node-parameter updates (0.498 -> 0.198
ms), 2.95x [2.92, 2.99] with exec update (0.169 ms); 3.71 -> 1.36 / 1.08 us per kernel.
Run: python ch12/baseline_graph_update.py  |  aisp bench run -t ch12:graph_update
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import torch
from ch12_common import FLT, INT, PTR, affine_chain_reference, floats, library, microseconds_per_call

import aisp
from aisp.kits import native


@dataclass(frozen=True, kw_only=True)
class UpdateWorkload(aisp.Workload):
    n: int = 4096
    nodes: int = 16
    """Kernels in the graph."""
    steps: int = 8
    """Graph launches per call, each with its own c_t."""
    a: float = 0.99

    def coefs(self) -> list[float]:
        """c_t of each step."""
        return [0.01 * (t + 1) for t in range(self.steps)]


def _workload() -> UpdateWorkload:
    s = UpdateWorkload()
    kernels = s.nodes * s.steps
    # element_tol: 1e-4 absolute at max |out| ~4.8 (same kernels, the same math).
    # Latency: every kernel but the call's first (which reads the input copy) updates, in place, the out the
    # kernel before it wrote (the last of the previous launch for a launch's first). One graph launch: the
    # call's first, from idle; the host issues the other 7 while the GPU runs the graph before (a launch
    # is 4.32 us of host issue against a graph's ~14 us of chain), so they overlap it. Until 2026-11-30 all
    # 8 were summed (128 us), a floor that optimized_graph_update_indirect_pdl beat (0.1175 ms, 109%).
    # Bytes: each of the 128 kernels reads and writes the 16 KB vector, which L2 holds: link l2, not hbm.
    return UpdateWorkload(flops=2.0 * s.n * kernels, bytes=8.0 * s.n * kernels, link="l2", items=kernels,
                          item_unit="kernels",
                          latency=aisp.LatencyCounts(graph_launches=1, graph_nodes=1, dependent_graph_nodes=kernels - 1),
                          precision="fp32", element_tol=2e-5, requires=native.REQUIRES,
                          ceiling_note="_indirect_pdl: 128 kernels at ~0.92 us (time / kernels) vs the 0.73 us dependent floor; profiled (torch profiler): _template's at 1.05 us",
                          window="idle")


WORKLOAD = _workload()
LIBRARY = library("graph_update")
RUN = [PTR, PTR, PTR, INT, PTR]
SIGNATURES = {"update_build": [PTR, INT, INT, FLT, FLT, ctypes.POINTER(PTR)], "update_destroy": [PTR],
              "update_recapture": RUN, "update_setparams": RUN, "update_exec": RUN, "update_template": RUN,
              "update_ring": [PTR, INT], "update_indirect": RUN, "update_slots": [PTR, INT, INT]}


class RecapturedGraph(aisp.Benchmark):
    """out = x after 8 launches of the 16-kernel chain, c_t changing per launch."""

    workload = WORKLOAD
    inputs = ("x",)
    scratch = ("out",)
    entry = "update_recapture"

    def setup(self) -> None:
        w = self.workload
        self.lib = LIBRARY.load(self.device, SIGNATURES)
        self.x = torch.randn(w.n, device=self.device, generator=self.generator())
        self.out = torch.empty_like(self.x)
        self.coefs = floats(w.coefs())
        self.graph = PTR()
        native.check(self.lib.update_build(self.out.data_ptr(), w.n, w.nodes, w.a, w.coefs()[0],
                                           ctypes.byref(self.graph)), "update_build")
        self.prepare()
        got = self.run().clone()
        ref = affine_chain_reference(self.x, [(w.a, c) for c in w.coefs() for _ in range(w.nodes)])
        torch.testing.assert_close(got.double(), ref, rtol=1e-4, atol=1e-4)

    def prepare(self) -> None:
        """What a variant builds once beside the chain's graph, before the first call (nothing here)."""

    def run(self) -> torch.Tensor:
        call = getattr(self.lib, self.entry)
        native.check(call(self.graph, self.x.data_ptr(), self.coefs, self.workload.steps,
                          native.stream(self.device)), self.entry)
        return self.out

    def metrics(self) -> dict[str, float]:
        """Back-to-back time of a call per kernel it runs (8 launches x 16 nodes)."""
        return {"us_per_kernel": microseconds_per_call(self.run, self.device) / self.workload.items}

    def teardown(self) -> None:
        if getattr(self, "graph", None):
            torch.cuda.synchronize(self.device)
            native.check(self.lib.update_destroy(self.graph), "update_destroy")
            self.graph = None


def get_benchmark() -> aisp.Benchmark:
    return RecapturedGraph()


if __name__ == "__main__":
    aisp.main(get_benchmark)
