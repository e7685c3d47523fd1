"""Optimized graph update, whole-graph form (CUDA C++): re-capture, then cudaGraphExecUpdate.

Baseline (baseline_graph_update.py): capture + instantiate + launch per step (8 per call).
Optimized: graph_update.cu ``update_exec``: per step the 16 launches are still captured with the
new c_t, but the captured graph updates the one instantiated graph in place (cudaGraphExecUpdate:
same topology, new arguments) instead of being instantiated. It is the form for code that cannot
name the nodes it changes (a library call inside the capture); it keeps the capture's host cost
that the node update (optimized_graph_update.py) avoids.
Expect (measured, H200, 2026-11-23): 2.95x [2.92, 2.99] (0.169 ms); faster than the node-parameter
variant, against the estimate (1.08 vs 1.36 us per node): here one capture plus one
cudaGraphExecUpdate per step cost less than 16 cudaGraphExecKernelNodeSetParams calls.
Run: python ch12/optimized_graph_update_exec_update.py  |  aisp bench run -t ch12:graph_update
"""

from __future__ import annotations

from baseline_graph_update import RecapturedGraph

import aisp


class ExecUpdatedGraph(RecapturedGraph):
    entry = "update_exec"


def get_benchmark() -> aisp.Benchmark:
    return ExecUpdatedGraph()


if __name__ == "__main__":
    aisp.main(get_benchmark)
