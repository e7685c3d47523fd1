"""Optimized conditional WHILE, input copy in the graph (CUDA C++): the call is one graph launch.

Baseline (baseline_conditional_while.py): per pass a launch, a D2H flag copy and a host sync.
Optimized: optimized_conditional_while.py's graph, whose first node copies the input as well:
conditional_while.cu ``while_build_in_graph`` (setup) builds copy_and_reset (x = in over 256 blocks,
and the loop's counters reset) -> WHILE { cos_step; loop_decide }, and each call is one
``cudaGraphLaunch``. optimized_conditional_while.py issues a cudaMemcpyAsync before its launch: in
this pair's idle window (the host's path to the first GPU work is timed) that is a second API call and
a second piece of GPU work ahead of the graph. The graph reads ``x`` at the address it was built with
(the harness refills inputs in place), as a graph's static input buffer does. Same kernels, same
passes, same bits.
Expect (measured, H200, 2026-11-29, two runs): 0.2138 and 0.2285 ms, 89.9% and 84.1% of the 192 us
ceiling (1 graph launch, 4.32 us + 37 WHILE passes, 4.53 us + 38 nodes, 0.53 us), 3.43x [3.28, 3.59]
and 3.32x [3.26, 3.39]; the plain WHILE variant read 0.2232 / 0.2324 ms (86.1 / 82.7%) in the same
runs, both after cos_step's change to one flag store a block (the in-graph copy saves 4-9 us more).
The baseline read 0.74-0.76 ms in these runs against 0.66-0.68 before (its host loop), so these
speedups run above the earlier ones. Estimated before (arithmetic): 225-240 us, 80-85%, from the
257 us measured before, if the block-level flag saved 0.4-0.8 us a pass and the copy 2-4 us.
Run: python ch12/optimized_conditional_while_in_graph.py  |  aisp bench run -t ch12:conditional_while
"""

from __future__ import annotations

import ctypes

import torch
from ch12_common import PTR
from optimized_conditional_while import WhileNodeLoop

import aisp
from aisp.kits import native


class WhileNodeLoopCopyInGraph(WhileNodeLoop):
    def prepare(self) -> None:
        w, self.exec = self.workload, PTR()
        native.check(self.lib.while_build_in_graph(self.x.data_ptr(), self.out.data_ptr(), w.n, w.tol, w.max_iters,
                                                   self.loop.data_ptr(), ctypes.byref(self.exec)),
                     "while_build_in_graph")

    def run(self) -> torch.Tensor:
        native.check(self.lib.graph_launch(self.exec, native.stream(self.device)), "graph_launch")
        return self.out


def get_benchmark() -> aisp.Benchmark:
    return WhileNodeLoopCopyInGraph()


if __name__ == "__main__":
    aisp.main(get_benchmark)
