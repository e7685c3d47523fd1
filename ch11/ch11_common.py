"""Code chapter 11's pairs share (not a pair): the small-kernel CUDA C++ library and the overlap
figures every stream pair reports from ``metrics()``.

Overlap against the ideal: a multi-stream call is made of parts (a copy per direction, the work of
each stream) that could run alone. Run serially they take the sum of their times; perfectly
overlapped, only the longest one. ``overlap()`` times each part alone and the whole call, and
``overlap_share`` places the call between the two: 0 = serial, 1 = the ideal (max of parts).
"""

from __future__ import annotations

import ctypes
import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

from aisp.kits import native

HERE = Path(__file__).resolve().parent
KERNELS = native.Library((HERE / "ch11_kernels.cu",))
"""ch11_kernels.cu: ``small_kernel`` (one fma_chain launch), ``small_kernel_pdl`` (the same launched with
programmatic dependent launch), ``small_kernel_unrolled`` (either, with the chain's loop unrolled 64 a
trip and a chosen block size) and ``legacy_run``."""
GREEN = native.Library((HERE / "green_contexts.cu",))
"""green_contexts.cu: ``green_init`` (two green contexts splitting the SMs, one stream each), ``green_fork`` /
``green_join`` (their streams after / before the caller's) and ``green_chain_ms`` (the chain stream's span)."""
THREADS = 256
"""Threads per block of fma_chain (kThreads in ch11_kernels.cu)."""
INT, PTR = ctypes.c_int, ctypes.c_void_p


def load_kernels(device: torch.device) -> ctypes.CDLL:
    """ch11_kernels.cu built for ``device``'s GPU, with its entry points' argument types set."""
    lib = KERNELS.load(device)
    lib.small_kernel.argtypes = [PTR, PTR, INT, INT, PTR]
    lib.small_kernel_pdl.argtypes = [PTR, PTR, INT, INT, PTR]
    lib.small_kernel_unrolled.argtypes = [PTR, PTR, INT, INT, INT, INT, PTR]
    lib.legacy_run.argtypes = [INT, PTR, PTR, INT, INT, INT, PTR]
    return lib


def load_green(device: torch.device) -> ctypes.CDLL:
    """green_contexts.cu built for ``device``'s GPU, with its entry points' argument types set."""
    lib = GREEN.load(device)
    lib.green_init.argtypes = [INT, INT, ctypes.POINTER(PTR), ctypes.POINTER(INT)]
    lib.green_fork.argtypes = [PTR]
    lib.green_join.argtypes = [PTR]
    lib.green_chain_ms.argtypes = [ctypes.POINTER(ctypes.c_float)]
    return lib


def small_kernel(lib: ctypes.CDLL, src: torch.Tensor, dst: torch.Tensor, iters: int,
                 stream: torch.cuda.Stream, pdl: bool = False) -> None:
    """dst = fma_chain(src) (``iters`` dependent FMAs per element), launched on ``stream``; ``pdl``:
    with programmatic dependent launch (it may start before the stream's previous kernel ends and
    reads ``src`` once that kernel has completed, so ``src`` may be its output)."""
    entry = lib.small_kernel_pdl if pdl else lib.small_kernel
    status = entry(src.data_ptr(), dst.data_ptr(), src.numel(), iters, PTR(stream.cuda_stream))
    native.check(status, "small_kernel_pdl" if pdl else "small_kernel")


def small_kernel_unrolled(lib: ctypes.CDLL, src: torch.Tensor, dst: torch.Tensor, iters: int,
                          stream: torch.cuda.Stream, pdl: bool = False, threads: int = THREADS) -> None:
    """:func:`small_kernel` with the chain's loop unrolled 64 FMAs a trip (the same FMAs in the same order:
    the same output bit for bit), in blocks of ``threads`` (a multiple of 32, at most 1024)."""
    status = lib.small_kernel_unrolled(src.data_ptr(), dst.data_ptr(), src.numel(), iters, int(pdl), threads,
                                       PTR(stream.cuda_stream))
    native.check(status, "small_kernel_unrolled")


def fma_chain_reference(x: torch.Tensor, iters: int) -> torch.Tensor:
    """What fma_chain computes, in closed form and float64: v <- a v + b (a, b the kernel's float32
    constants) gives v_n = c + (v_0 - c) a^n with c = b / (1 - a), about 1."""
    a, b = (float(torch.tensor(v, dtype=torch.float32)) for v in (0.9999, 1e-4))
    c = b / (1.0 - a)
    return c + (x.double() - c) * a**iters


def milliseconds(fn: Callable[[], object], device: torch.device, repeats: int = 5) -> float:
    """Median wall time of ``fn()`` between device-wide syncs, in ms."""
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize(device)
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def overlap_share(sum_ms: float, max_ms: float, measured_ms: float) -> float:
    """Where a measured call lies between serial (sum of its parts: 0) and the ideal overlap (its
    longest part: 1); NaN when the parts cannot overlap (one part)."""
    if sum_ms <= max_ms:
        return math.nan
    return (sum_ms - measured_ms) / (sum_ms - max_ms)


def overlap(parts: dict[str, Callable[[], object]], whole: Callable[[], object],
            device: torch.device) -> dict[str, float]:
    """Each part timed alone, the sum and max of parts, the whole call, and its overlap share."""
    times = {f"{name}_ms": milliseconds(fn, device) for name, fn in parts.items()}
    total, longest = sum(times.values()), max(times.values())
    measured = milliseconds(whole, device)
    return {**times, "sum_of_parts_ms": total, "max_of_parts_ms": longest, "measured_ms": measured,
            "overlap_share": overlap_share(total, longest, measured)}
