"""Optimized device graph launch, fire-and-forget (CUDA C++): the path graph starts at once.

Baseline (baseline_device_graph_launch.py): per request a D2H copy of the GPU's choice, a host
sync and a host cudaGraphLaunch of the chosen path's graph.
Optimized: as optimized_device_graph_launch.py, but the gate launches the path into
cudaStreamGraphFireAndForget: the path starts at once as a child of the scheduler's execution
environment instead of after the scheduler graph has ended. The scheduler's tail relaunch (the
next request's gate) still waits for that whole environment, path included, so the order and the
answer are the same. What it can save is the gap between the gate's end and the path's start; a
graph may fire and forget at most 120 graphs per launch (here one).
Expect (measured, H200, 2026-11-26): 1.697 -> 0.9481 ms, 1.80x [1.67, 1.93], 26.5 -> 14.8 us per
request, the pair's best: 15% less time than the tail-launch variant's 1.118 ms (1.53x [1.44,
1.62]), beyond the "within 10%, either way" estimated (not profiled).
Run: python ch12/optimized_device_graph_launch_fire_and_forget.py  |  aisp bench run -t ch12:device_graph_launch
"""

from __future__ import annotations

from baseline_device_graph_launch import FIRE_AND_FORGET
from optimized_device_graph_launch import DeviceDispatch

import aisp


class FireAndForgetDispatch(DeviceDispatch):
    mode = FIRE_AND_FORGET


def get_benchmark() -> aisp.Benchmark:
    return FireAndForgetDispatch()


if __name__ == "__main__":
    aisp.main(get_benchmark)
