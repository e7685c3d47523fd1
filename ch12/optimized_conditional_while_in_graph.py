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
Expect (estimate, not yet measured): arithmetic, not a measurement. The ceiling is 1 graph launch
(4.32 us) + 37 WHILE passes (4.53 us) + 38 nodes (0.53 us), 192 us on an H200; 80% of it is 240 us.
Measured so far (H200): 257 us, ~6.6 us a pass against the 5.06 us the ceiling prices. The copy
leaving the host path saves ~2-4 us (its API call; the GPU copy overlapped the graph launch's API
call). cos_step's one flag store a block instead of one a warp (both variants, and the baseline)
removes up to ~1,800 stores a pass queued at one L2 slice: if that saves 0.4-0.8 us a pass, 37 passes
give 15-30 us: 225-240 us, 80-85%.
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
