"""Optimized CUDA graphs, PDL variant: the 200-kernel chain replayed as one graph with programmatic edges.

Baseline (baseline_cuda_graphs.py): 200 eager launches (100 layers of addcmul then tanh on 4,096
floats), each paying Python, dispatcher and driver time while the GPU idles.
Optimized: as optimized_cuda_graphs.py (captured once in setup(), one replay a call, 200 nodes), but
the nodes are layer_chain.cu's lean kernels (``addcmul_step``, ``tanh_step``: 4 blocks of 256
threads, a float4 each) launched with programmatic dependent launch (PDL, sm_90), which capture
records as programmatic edges. Each node lets its successor launch on entry, so later nodes are
launched and their blocks placed while earlier ones run; each waits in griddepcontrol.wait until
the node before it has completed and its stores are visible, then loads, computes and stores. Same
200 kernels, same bytes, same order, same answer; a node's launch and block placement leave the chain.
Expect: measured (H200, 2026-11-29, two runs of 20 samples): 0.2699 / 0.2123 ms against the plain
graph's 0.3572 / 0.2970 in the same runs (1.32-1.40x), 56-71% of the 150 us latency ceiling; the
spread between runs is the host's. Estimated 0.10-0.17 ms: PDL and the lean kernels took ~0.3-0.4
us off a node, not the 0.45-0.7 estimated. ``metrics()``: us_per_kernel with and without PDL.
Run: python ch01/optimized_cuda_graphs_pdl.py  |  aisp bench run -t ch01:cuda_graphs
     |  cd ch01 && make && ./bin/layer_chain_sm90
"""

from __future__ import annotations

import ctypes
import dataclasses
from pathlib import Path

import torch
from baseline_cuda_graphs import WORKLOAD, EagerLayers
from ch01_common import capture

import aisp
from aisp.kits import native

HERE = Path(__file__).resolve().parent
LIBRARY = native.Library((HERE / "layer_chain.cu",), flags=("-DCH01_LIBRARY",))
PTR, INT = ctypes.c_void_p, ctypes.c_int
SIGNATURES = {"layers_run": (PTR, PTR, PTR, PTR, PTR, INT, INT, INT, PTR)}
"""layers_run(h0, scale, shift, t, h, width, layers, pdl, stream): the chain's 2 x layers launches."""


class PdlGraphLayers(EagerLayers):
    workload = dataclasses.replace(WORKLOAD, requires=aisp.Requirements(
        cuda=True, executables=("nvcc",), min_compute_capability=(9, 0)))
    scratch = ("out", "t")

    def setup(self) -> None:
        super().setup()
        self.lib = LIBRARY.load(self.device, SIGNATURES)
        self.t, self.out = torch.empty_like(self.h0), torch.empty_like(self.h0)
        self.graph, _ = capture(self.launch, self.device)
        torch.testing.assert_close(self.run(), self.layers(), rtol=1e-4, atol=1e-4)  # fmaf vs ATen: ulps

    def launch(self, pdl: bool = True) -> torch.Tensor:
        """The 200 kernels on the current stream, writing ``out`` (pdl: with programmatic edges)."""
        w = self.workload
        status = self.lib.layers_run(self.h0.data_ptr(), self.scale.data_ptr(), self.shift.data_ptr(),
                                     self.t.data_ptr(), self.out.data_ptr(), w.width, w.layers, int(pdl),
                                     native.stream(self.device))
        native.check(status, "layers_run")
        return self.out

    def run(self) -> torch.Tensor:
        self.graph.replay()
        return self.out

    def us_per_kernel(self, graph: torch.cuda.CUDAGraph, replays: int = 20) -> float:
        """Microseconds a node over ``replays`` back-to-back replays of ``graph`` (CUDA events)."""
        graph.replay()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e3 / replays / (2 * self.workload.layers)

    def metrics(self) -> dict[str, float]:
        """us_per_kernel, and the same lean kernels captured without PDL (what PDL itself takes off)."""
        plain, _ = capture(lambda: self.launch(pdl=False), self.device)
        return {"us_per_kernel": self.us_per_kernel(self.graph), "us_per_kernel_no_pdl": self.us_per_kernel(plain)}

    def teardown(self) -> None:
        self.graph = None
        super().teardown()


def get_benchmark() -> aisp.Benchmark:
    return PdlGraphLayers()


if __name__ == "__main__":
    aisp.main(get_benchmark)
