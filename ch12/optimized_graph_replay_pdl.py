"""Optimized graph replay, PDL variant: the replayed 200-kernel chain with programmatic dependent launch.

Baseline (baseline_graph_replay.py): 200 host launches of a tiny kernel.
Optimized: as optimized_graph_replay.py (captured once in setup(), one cudaGraphLaunch per call),
but every launch is captured with cudaLaunchAttributeProgrammaticStreamSerialization (graph_replay.cu
``replay_build_pdl``): the graph's edges are programmatic, so node k + 1 is launched and its 16
blocks placed while node k still runs; they wait in griddepcontrol.wait until node k has completed
and its stores are visible, then load (from L2), compute and store. The chain's order and answer
stay; what leaves the chain is each node's launch and block placement, the part of the profiled 1.0
us a node (torch profiler, H200, 2026-11-29) that is not the dependent load and store. Each node
triggers its successor on entry (``trigger_first``): several nodes wait ahead, so no launch is ever
on the chain; ``metrics()`` also times the other placement (trigger after the wait, one node ahead,
as ch11's PDL kernels do) for the record.
Expect (measured, H200, 2026-11-29, two runs of 20 samples): 0.2503 / 0.2104 ms against the plain
graph's 0.2979 / 0.2593 in the same runs (1.19-1.23x), 60-71% of the 150 us latency ceiling; the
host-bound spread between runs is the host's. Estimated 0.12-0.17 ms: PDL hid ~0.2 us a node, not
the 0.3-0.5 estimated.
Run: python ch12/optimized_graph_replay_pdl.py  |  aisp bench run -t ch12:graph_replay
"""

from __future__ import annotations

import ctypes

from ch12_common import PTR, microseconds_per_call
from optimized_graph_replay import ReplayedChain

import aisp
from aisp.kits import native


class PdlReplayedChain(ReplayedChain):
    trigger_first = True
    """Each node lets its successor launch on entry (True) or once its own wait is over (False)."""

    def build(self, trigger_first: bool) -> PTR:
        """The chain captured with PDL and instantiated (a cudaGraphExec_t), for the same buffers."""
        w, exec_ = self.workload, PTR()
        native.check(self.lib.replay_build_pdl(self.x.data_ptr(), self.out.data_ptr(), w.n, w.steps, w.a, w.b,
                                               int(trigger_first), ctypes.byref(exec_)), "replay_build_pdl")
        return exec_

    def prepare(self) -> None:
        self.exec = self.build(self.trigger_first)

    def metrics(self) -> dict[str, float]:
        """us_per_kernel, and the same figure for the other trigger placement (its own graph)."""
        figures = super().metrics()
        other = self.build(not self.trigger_first)
        try:
            stream = native.stream(self.device)
            us = microseconds_per_call(lambda: native.check(self.lib.graph_launch(other, stream), "graph_launch"),
                                       self.device)
        finally:
            native.check(self.lib.graph_destroy(other), "graph_destroy")
        name = "us_per_kernel_trigger_after_wait" if self.trigger_first else "us_per_kernel_trigger_first"
        return {**figures, name: us / self.workload.steps}


def get_benchmark() -> aisp.Benchmark:
    return PdlReplayedChain()


if __name__ == "__main__":
    aisp.main(get_benchmark)
