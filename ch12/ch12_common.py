"""Code chapter 12's pairs share (not a pair): building and loading their CUDA C++ libraries with
typed entry points, the closed-form references, and the ctypes types the libraries take.

Every pair is CUDA C++ (``aisp.kits.native``): graphs, conditional nodes and device-side launches
are CUDA runtime features, launched on the caller's stream so the harness times them.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from aisp.kits import native

HERE = Path(__file__).resolve().parent
INT, FLT, DBL, PTR = ctypes.c_int, ctypes.c_float, ctypes.c_double, ctypes.c_void_p
GRAPH_ENTRY_POINTS = {"graph_launch": [PTR, PTR], "copy_then_launch": [PTR, PTR, INT, PTR, PTR],
                      "graph_destroy": [PTR]}
"""What every graph library exports (ch12_common.cuh), with its argument types."""


def library(stem: str, *flags: str) -> native.Library:
    """ch12/<stem>.cu as a native library."""
    return native.Library((HERE / f"{stem}.cu",), flags=flags)



def floats(values: Sequence[float]) -> ctypes.Array:
    """A host float array for an entry point that takes ``const float*`` on the host."""
    return (FLT * len(values))(*values)


def affine_chain_reference(x: torch.Tensor, coefs: Sequence[tuple[float, float]]) -> torch.Tensor:
    """x after out = a * out + b for each (a, b) in order, in float64 (what the graph chains compute)."""
    out = x.double()
    for a, b in coefs:
        out = a * out + b
    return out



def microseconds_per_call(fn: Callable[[], object], device: torch.device, repeats: int = 20) -> float:
    """Mean time of ``fn()`` back to back on the current stream (CUDA events), after one warmup call,
    in microseconds: what the README divides by the kernels of a call to get the cost per node."""
    fn()
    torch.cuda.synchronize(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / repeats
