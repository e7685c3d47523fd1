"""Optimized graph replay (CUDA C++): the 200-kernel chain captured once, replayed per call.

Baseline (baseline_graph_replay.py): 200 host launches of a tiny kernel.
Optimized: setup() captures the same 200 launches on a private stream (graph_replay.cu
``replay_build``) and instantiates them into a cudaGraphExec bound to the input and output
buffers (their addresses never change: the harness refills inputs in place). Each call is one
cudaGraphLaunch on the caller's stream: one host call instead of 200, and the GPU front end
launches each node without waiting for the host.
Expect (measured, H200, 2026-11-23): 3.70x [3.56, 3.85]; 0.98 us per node, under the 1.2 us measured
for a graph node of the launch probe. Measured again (H200, 2026-11-29): 0.9948 -> 0.2185 ms, 4.54x
[4.22, 4.89], 1.09 us per node: 69% of its latency ceiling (150 us: one graph launch, one node and 199
dependent nodes at the measured 0.73 us a one-thread node; 48% when they were priced as empty nodes).
Run: python ch12/optimized_graph_replay.py  |  aisp bench run -t ch12:graph_replay
"""

from __future__ import annotations

import ctypes

import torch
from baseline_graph_replay import EagerChain
from ch12_common import PTR

import aisp
from aisp.kits import native


class ReplayedChain(EagerChain):
    def prepare(self) -> None:
        w, self.exec = self.workload, PTR()
        native.check(self.lib.replay_build(self.x.data_ptr(), self.out.data_ptr(), w.n, w.steps, w.a, w.b,
                                           ctypes.byref(self.exec)), "replay_build")

    def run(self) -> torch.Tensor:
        native.check(self.lib.graph_launch(self.exec, native.stream(self.device)), "graph_launch")
        return self.out

    def teardown(self) -> None:
        if getattr(self, "exec", None):
            native.check(self.lib.graph_destroy(self.exec), "graph_destroy")
            self.exec = None


def get_benchmark() -> aisp.Benchmark:
    return ReplayedChain()


if __name__ == "__main__":
    aisp.main(get_benchmark)
