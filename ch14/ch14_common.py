"""Shared by chapter 14's compile pairs: the wall time of a variant's first setup in a process.

``torch.compile`` does its work on the first calls: Dynamo traces, Inductor lowers and writes
Triton kernels, Triton compiles them, max-autotune benchmarks GEMM configurations and
reduce-overhead records CUDA graphs. A pair does all of that in setup() (untimed), so the timed
calls measure the steady state, and reports the time here as ``compile_s`` beside the speedup.
The harness sets up each variant twice (a fresh seed, then the main seed): only the first, cold
one is kept. Inductor's FX graph cache is off while it is measured, so a warm disk cache from an
earlier run does not hide the lowering (the second setup may use what the first one stored);
Triton's compiled-kernel cache is used as found.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import torch

T = TypeVar("T")
FIRST_SETUP_S: dict[str, float] = {}
"""Seconds of the first timed_compile() of each key in this process."""


def timed_compile(key: str, device: torch.device, build: Callable[[], T]) -> T:
    """Run ``build`` (compile and warm up) and record the time of its first run in this process,
    which runs with the FX graph cache off (later runs, e.g. the second seed's, may use it)."""
    start = time.perf_counter()
    with torch._inductor.config.patch(fx_graph_cache=key in FIRST_SETUP_S):
        result = build()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    FIRST_SETUP_S.setdefault(key, time.perf_counter() - start)
    return result


def compile_metrics(key: str) -> dict[str, float]:
    """{"compile_s": ...} once ``key`` has been compiled in this process, else {}."""
    return {"compile_s": FIRST_SETUP_S[key]} if key in FIRST_SETUP_S else {}
