"""Code chapter 12's pairs share (not a pair): building and loading their CUDA C++ libraries with
typed entry points, the closed-form references, and the ctypes types the libraries take.

Every pair is CUDA C++ (``aisp.kits.native``): graphs, conditional nodes and device-side launches
are CUDA runtime features, launched on the caller's stream so the harness times them.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

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


def simpson_on_host(u: torch.Tensor, v: torch.Tensor, tol: float, max_levels: int) -> tuple[torch.Tensor, list[int]]:
    """dynamic_parallelism.cu's level-by-level adaptive Simpson in float64 on the CPU: every cell's
    integral, and each level's interval count. The same rule accepts and splits the same intervals,
    so it also misses what the rule misses: a peak narrower than the spacing of an interval's five
    samples can read as converged (about 1 cell in 18,000 with these inputs, off by up to ~3.1)."""
    u, v = u.double().cpu(), v.double().cpu()
    p, w = 0.5 + 0.5 * torch.tanh(u), 10.0 ** (-2.0 - torch.tanh(v))
    cell = torch.arange(len(u))
    a, b = torch.zeros(len(u), dtype=torch.float64), torch.ones(len(u), dtype=torch.float64)
    out, sizes = torch.zeros(len(u), dtype=torch.float64), []
    while len(cell):
        sizes.append(len(cell))
        pc, wc = p[cell], w[cell]

        def f(x: torch.Tensor, pc: torch.Tensor = pc, wc: torch.Tensor = wc) -> torch.Tensor:
            return wc / ((x - pc) ** 2 + wc**2)

        m, h = (a + b) / 2, b - a
        whole = h / 6 * (f(a) + 4 * f(m) + f(b))
        halves = h / 12 * (f(a) + 4 * f((a + m) / 2) + 2 * f(m) + 4 * f((m + b) / 2) + f(b))
        done = ((halves - whole).abs() <= 15 * tol * h) | (len(sizes) >= max_levels)
        out.index_add_(0, cell[done], (halves + (halves - whole) / 15)[done])
        keep = ~done
        cell, a, b = cell[keep].repeat(2), torch.cat([a[keep], m[keep]]), torch.cat([m[keep], b[keep]])
    return out, sizes


def check_refinement(got: torch.Tensor, u: torch.Tensor, v: torch.Tensor, workload: Any) -> None:
    """The kernels' integrals equal the same rule run on the host. 1e-6 absolute covers an interval
    whose split test sits within an ulp of the threshold (the device's tanh and exp10 may round
    differently), which moves that cell by about the rule's local error, ~1e-7; a lost, doubled or
    misplaced interval moves its cell by its whole share. Not the exact integrals: the rule's own
    error exceeds 1e-5 in about one run in five at a random seed, and a missed peak is off by ~3."""
    want = simpson_on_host(u, v, workload.tol, workload.max_levels)[0]
    torch.testing.assert_close(got.double().cpu(), want, rtol=0, atol=1e-6)
