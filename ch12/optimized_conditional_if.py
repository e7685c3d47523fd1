"""Optimized conditional IF (CUDA C++): each stage's branch as an IF node decided on the GPU.

Baseline (baseline_conditional_if.py): eight stages, each with a D2H flag copy and a host sync
before the branch.
Optimized: conditional_if.cu ``if_build`` (setup) builds one graph: per stage the norm kernel, a
one-thread kernel calling cudaGraphSetConditional(handle_s, flag), an IF conditional node
(cudaGraphCondTypeIf, its own handle, default 0) whose body is the clip kernel, then the grow
kernel. Each call copies the input and launches the graph once; the GPU skips or runs each clip.
Expect (measured, H200, 2026-11-23): 1.62x [1.60, 1.65]; 16.5 us per stage (kernel time plus node
cost).
Run: python ch12/optimized_conditional_if.py  |  aisp bench run -t ch12:conditional_if
"""

from __future__ import annotations

import ctypes

import torch
from baseline_conditional_if import HostBranch
from ch12_common import PTR

import aisp
from aisp.kits import native


class IfNodeBranch(HostBranch):
    def prepare(self) -> None:
        w, self.exec = self.workload, PTR()
        native.check(self.lib.if_build(self.out.data_ptr(), w.n, len(w.ratios), self.thresholds, w.grow,
                                       self.flags.data_ptr(), self.scales.data_ptr(), ctypes.byref(self.exec)),
                     "if_build")

    def run(self) -> torch.Tensor:
        native.check(self.lib.copy_then_launch(self.x.data_ptr(), self.out.data_ptr(), self.workload.n, self.exec,
                                               native.stream(self.device)), "copy_then_launch")
        return self.out

    def teardown(self) -> None:
        if getattr(self, "exec", None):
            native.check(self.lib.graph_destroy(self.exec), "graph_destroy")
            self.exec = None


def get_benchmark() -> aisp.Benchmark:
    return IfNodeBranch()


if __name__ == "__main__":
    aisp.main(get_benchmark)
