"""Conditional-node floor: one pass of a WHILE graph node whose body is one kernel (CUDA 12.4+).

A loop that a WHILE node runs on the GPU (``ch12:conditional_while``) pays, each pass, the
conditional's own cost and its body's kernels; ``launch_graph_node`` prices a plain node, not the
pass. ``graph_while.cu`` builds a graph of one WHILE node whose body is one kernel that counts the
pass and sets the condition; each launch runs :data:`PASSES` passes, launches go back to back, and
the window per pass is one iteration. The passes that ran are counted against those launched.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import torch

from aisp.kits import native
from aisp.peak.latency import check_counted, figure, host_us_per_call
from aisp.peak.probes import gpu_library

LIBRARY = native.Library((Path(__file__).with_name("graph_while.cu"),))
PASSES = 64
"""WHILE passes a launch: enough that the graph launch itself is a small share of the window."""
SIGNATURES = {"while_graph_create": [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p],
              "while_graph_launch": [ctypes.c_void_p, ctypes.c_void_p], "while_graph_destroy": [ctypes.c_void_p]}


def while_pass(device: torch.device, calls: int, repeats: int) -> dict[str, dict[str, Any]]:
    """``graph_while_iteration``: µs per pass of ``calls`` back-to-back launches of a :data:`PASSES`-pass
    WHILE graph (the median of ``repeats`` windows); :class:`ProbeSkipped` without a GPU or nvcc."""
    lib = gpu_library(device, LIBRARY, SIGNATURES, "a conditional graph node")
    stream = native.stream(device)
    with torch.cuda.device(device):
        ran = torch.zeros(1, dtype=torch.int32, device=device)
        exec_ = ctypes.c_void_p()
        native.check(lib.while_graph_create(native.ptr(ran), PASSES, ctypes.byref(exec_)), "while_graph_create")
        try:
            per_launch = host_us_per_call(lambda: native.check(lib.while_graph_launch(exec_, stream),
                                                               "while_graph_launch"), device, calls, repeats)
        finally:
            torch.cuda.synchronize(device)
            lib.while_graph_destroy(exec_)
        check_counted(int(ran.item()), PASSES, calls, repeats, "while_graph: passes")
    return {"graph_while_iteration": figure(per_launch / PASSES, f"a WHILE node of {PASSES} passes, its body one "
                                                                 f"kernel that sets the condition; {calls} launches "
                                                                 f"back to back, median of {repeats} windows")}

