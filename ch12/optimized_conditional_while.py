"""Optimized conditional WHILE (CUDA C++): the convergence loop as a WHILE node decided on the GPU.

Baseline (baseline_conditional_while.py): per pass a launch, a D2H flag copy and a host sync.
Optimized: conditional_while.cu ``while_build`` (setup) builds one graph: a reset kernel, then a
WHILE conditional node (cudaGraphConditionalHandleCreate with default 1, cudaGraphCondTypeWhile)
whose body is the step and a one-thread kernel calling cudaGraphSetConditional(handle, still moving
and passes < 200). Each call copies the input and launches the graph once: the GPU re-runs the
body until the condition is 0, with no host in the loop. Same kernels, same passes, same result.
Expect (measured, H200, 2026-11-23): 2.58x [2.33, 2.87]; 5.7 us per pass of two nodes.
Run: python ch12/optimized_conditional_while.py  |  aisp bench run -t ch12:conditional_while
"""

from __future__ import annotations

import ctypes

import torch
from baseline_conditional_while import HostDrivenLoop
from ch12_common import PTR

import aisp
from aisp.kits import native


class WhileNodeLoop(HostDrivenLoop):
    def prepare(self) -> None:
        w, self.exec = self.workload, PTR()
        native.check(self.lib.while_build(self.out.data_ptr(), w.n, w.tol, w.max_iters, self.loop.data_ptr(),
                                          ctypes.byref(self.exec)), "while_build")

    def run(self) -> torch.Tensor:
        native.check(self.lib.copy_then_launch(self.x.data_ptr(), self.out.data_ptr(), self.workload.n, self.exec,
                                               native.stream(self.device)), "copy_then_launch")
        return self.out

    def passes_run(self) -> int:
        """Passes the last call ran, as the graph counted them."""
        return int(self.loop[1].item())

    def teardown(self) -> None:
        if getattr(self, "exec", None):
            native.check(self.lib.graph_destroy(self.exec), "graph_destroy")
            self.exec = None


def get_benchmark() -> aisp.Benchmark:
    return WhileNodeLoop()


if __name__ == "__main__":
    aisp.main(get_benchmark)
