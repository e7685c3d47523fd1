"""Device-side launch floors: a grid, or a graph, launched from the GPU after the one launching it.

A dynamic-parallelism loop (``ch12:dynamic_parallelism``) launches each level from the device, after
the level before it; no host launch, graph launch or graph node prices that. ``device_launch.cu``'s
kernel tail-launches itself down a chain of :data:`LINKS` empty grids; chains go back to back, so the
GPU stays on them, and the window's time per link is one device-launched grid, its empty kernel
included (as ``launch_graph_node`` includes an empty node's). The count of grids that ran is checked
against the links launched, so a launch the device runtime refused cannot read as a fast one.

``launch_device_graph`` does the same for a graph launched from the GPU (``ch12:device_graph_launch``'s
scheduler): a one-kernel graph, instantiated for device launch, whose kernel launches its own graph
again (``cudaGetCurrentGraphExec``, ``cudaStreamGraphTailLaunch``) until a chain of :data:`LINKS` has run.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import torch

from aisp.kits import native
from aisp.peak.latency import check_counted, figure, host_us_per_call
from aisp.peak.probes import gpu_library

LIBRARY = native.Library((Path(__file__).with_name("device_launch.cu"),), ("-rdc=true", "-lcudadevrt"))
LINKS = 16
"""Grids a chain: within the device runtime's nesting depth of 24 (ch12's 17 levels run as such a chain)."""
SIGNATURES = {"device_tail_chain": [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p],
              "device_graph_chain_create": [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p],
              "device_graph_chain_launch": [ctypes.c_void_p, ctypes.c_void_p],
              "device_graph_chain_destroy": [ctypes.c_void_p]}


def device_launches(device: torch.device, calls: int, repeats: int) -> dict[str, dict[str, Any]]:
    """``launch_device_tail`` and ``launch_device_graph``: µs per grid (per graph) of ``calls``
    back-to-back chains of :data:`LINKS` (the median of ``repeats`` windows); :class:`ProbeSkipped`
    without a GPU or nvcc."""
    lib = gpu_library(device, LIBRARY, SIGNATURES, "a device-side launch")
    stream = native.stream(device)
    how = f"{calls} chains back to back, median of {repeats} windows"
    with torch.cuda.device(device):
        ran = torch.zeros(2, dtype=torch.int32, device=device)
        per_grid = host_us_per_call(lambda: native.check(lib.device_tail_chain(LINKS, native.ptr(ran), stream),
                                                         "device_tail_chain"), device, calls, repeats) / LINKS
        check_counted(int(ran[0].item()), LINKS, calls, repeats, "device_tail_chain: grids")
        ran.zero_()
        exec_ = ctypes.c_void_p()
        native.check(lib.device_graph_chain_create(LINKS, native.ptr(ran), stream, ctypes.byref(exec_)),
                     "device_graph_chain_create")
        try:
            per_graph = host_us_per_call(lambda: native.check(lib.device_graph_chain_launch(exec_, stream),
                                                              "device_graph_chain_launch"), device, calls, repeats) / LINKS
        finally:
            torch.cuda.synchronize(device)
            lib.device_graph_chain_destroy(exec_)
        if int(ran[1].item()):
            raise RuntimeError(f"device graph launch failed on the GPU: cudaError {int(ran[1].item())}")
        check_counted(int(ran[0].item()), LINKS, calls, repeats, "device graph chain: graphs")
    return {"launch_device_tail": figure(per_grid, f"chains of {LINKS} empty grids, each tail-launched by the one "
                                                   f"before (cudaStreamTailLaunch), {how}"),
            "launch_device_graph": figure(per_graph, f"chains of {LINKS} launches of a one-kernel graph, each from "
                                                     f"the kernel of the one before (cudaGraphLaunch from the GPU, "
                                                     f"cudaStreamGraphTailLaunch), {how}")}

