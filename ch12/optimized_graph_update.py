"""Optimized graph update (CUDA C++): the changed argument written into the instantiated graph's nodes.

Baseline (baseline_graph_update.py): capture + instantiate + launch per step (8 per call).
Optimized: graph_update.cu ``update_setparams``: the 16-kernel graph is instantiated once (setup);
before each launch, cudaGraphExecKernelNodeSetParams gives each kernel node the new c_t (the
kernel, grid and the other arguments stay). A parameter update costs about a microsecond of host
time per node and nothing on the GPU, so a call costs 8 launches of an already-built graph.
Expect (measured, H200, 2026-11-23): 2.52x by medians (0.498 -> 0.198 ms); 1.36 us per node, near
the 1.2 us graph-node cost.
Run: python ch12/optimized_graph_update.py  |  aisp bench run -t ch12:graph_update
"""

from __future__ import annotations

from baseline_graph_update import RecapturedGraph

import aisp


class NodeParamsGraph(RecapturedGraph):
    entry = "update_setparams"


def get_benchmark() -> aisp.Benchmark:
    return NodeParamsGraph()


if __name__ == "__main__":
    aisp.main(get_benchmark)
