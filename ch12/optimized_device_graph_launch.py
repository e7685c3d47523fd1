"""Optimized device graph launch (CUDA C++): the GPU launches each request's graph itself.

Baseline (baseline_device_graph_launch.py): per request a gate kernel, a D2H copy of its choice, a
host sync and a host cudaGraphLaunch of the chosen path's graph: 64 round trips per call.
Optimized: device_graph_launch.cu ``dgl_paths`` (setup) instantiates both path graphs with
cudaGraphInstantiateFlagDeviceLaunch and uploads them (cudaGraphUpload); ``dgl_scheduler`` builds a
scheduler graph of one node, the gate kernel with its launch step compiled in (gate<true>),
instantiated for device launch too. Per call the host resets the state and launches the scheduler
once. For request r the gate's first thread, once the choice is made, calls
cudaGraphLaunch(path, cudaStreamGraphTailLaunch) and, unless r is the last,
cudaGraphLaunch(cudaGetCurrentGraphExec(), cudaStreamGraphTailLaunch): tail launches run in the
order queued once the launching graph has finished, so the path runs, then the gate of request
r + 1. The caller's stream sees one launch, complete when the last path is. Same kernels, same
paths, same bits. (A device graph holds only kernel, memcpy, memset and child-graph nodes, no
kernel may use dynamic parallelism, and one exec cannot run twice at once.)
Expect (measured, H200, 2026-11-26): 1.697 -> 1.118 ms, 1.53x [1.44, 1.62] (estimated 1.5-2.5x,
~10-15 us per request). The fire-and-forget variant was faster, 0.9481 ms, 1.80x [1.67, 1.93]
(26.5 -> 14.8 us per request), and is the pair's best. The first run failed verification: the
baseline's pinned choice buffer was not declared scratch (fixed).
Run: python ch12/optimized_device_graph_launch.py  |  aisp bench run -t ch12:device_graph_launch
"""

from __future__ import annotations

import ctypes

import torch
from baseline_device_graph_launch import TAIL, HostDispatch
from ch12_common import PTR

import aisp
from aisp.kits import native


class DeviceDispatch(HostDispatch):
    device_launch = True
    mode = TAIL
    """How the scheduler launches a path graph."""

    def prepare(self) -> None:
        self.exec = PTR()
        native.check(self.lib.dgl_scheduler(self.q, self.paths, self.mode, ctypes.byref(self.exec),
                                            native.stream(self.device)), "dgl_scheduler")

    def run(self) -> tuple[torch.Tensor, torch.Tensor]:
        native.check(self.lib.dgl_device(self.q, self.exec, native.stream(self.device)), "dgl_device")
        return self.out, self.routes

    def teardown(self) -> None:
        if getattr(self, "exec", None):
            native.check(self.lib.graph_destroy(self.exec), "graph_destroy")
            self.exec = None
        super().teardown()


def get_benchmark() -> aisp.Benchmark:
    return DeviceDispatch()


if __name__ == "__main__":
    aisp.main(get_benchmark)
