"""Device-side launch floor: one grid launched from the GPU after its parent (``cudaStreamTailLaunch``).

A dynamic-parallelism loop (``ch12:dynamic_parallelism``) launches each level from the device, after
the level before it; no host launch, graph launch or graph node prices that. ``device_launch.cu``'s
kernel tail-launches itself down a chain of :data:`LINKS` empty grids; chains go back to back, so the
GPU stays on them, and the window's time per link is one device-launched grid, its empty kernel
included (as ``launch_graph_node`` includes an empty node's). The count of grids that ran is checked
against the links launched, so a launch the device runtime refused cannot read as a fast one.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import torch

from aisp.kits import native
from aisp.peak.latency import figure, host_us_per_call
from aisp.peak.probes import ProbeSkipped

LIBRARY = native.Library((Path(__file__).with_name("device_launch.cu"),), ("-rdc=true", "-lcudadevrt"))
LINKS = 16
"""Grids a chain: within the device runtime's nesting depth of 24 (ch12's 17 levels run as such a chain)."""
SIGNATURES = {"device_tail_chain": [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]}


def device_tail(device: torch.device, calls: int, repeats: int) -> dict[str, dict[str, Any]]:
    """``launch_device_tail``: µs per grid of ``calls`` back-to-back chains of :data:`LINKS` grids (the
    median of ``repeats`` windows); :class:`ProbeSkipped` without a GPU or nvcc."""
    if device.type != "cuda":
        raise ProbeSkipped("no GPU: a device-side launch is a GPU figure")
    if reason := native.unavailable(device):
        raise ProbeSkipped(reason)
    lib = LIBRARY.load(device, SIGNATURES)
    ran = torch.zeros(1, dtype=torch.int32, device=device)
    stream = native.stream(device)

    def chain() -> None:
        native.check(lib.device_tail_chain(LINKS, native.ptr(ran), stream), "device_tail_chain")

    with torch.cuda.device(device):
        per_chain = host_us_per_call(chain, device, calls, repeats)
    check_ran(int(ran.item()), calls, repeats)
    return {"launch_device_tail": figure(per_chain / LINKS, f"chains of {LINKS} empty grids, each tail-launched "
                                                              f"by the one before (cudaStreamTailLaunch), {calls} "
                                                              f"chains back to back, median of {repeats} windows")}


def check_ran(ran: int, calls: int, repeats: int) -> None:
    """RuntimeError unless every grid launched ran: ``host_us_per_call`` runs one warm-up window and
    ``repeats`` timed ones of ``calls`` chains of :data:`LINKS` grids."""
    expected = (repeats + 1) * calls * LINKS
    if ran != expected:
        raise RuntimeError(f"device_tail_chain: {ran} grids ran, {expected} were launched")
