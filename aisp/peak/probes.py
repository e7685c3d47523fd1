"""Probes of one machine's ceilings: matmul rate per dtype, memory and transfer bandwidth,
GPU-to-GPU copy bandwidth and NCCL all-reduce bus bandwidth (2+ GPUs), torch.compile time (the
latency ceilings are in :mod:`aisp.peak.latency`, the host's memory, page-cache and first-touch rates
in :mod:`aisp.peak.host`, the L2 cache's bandwidth in :mod:`aisp.peak.l2`). Each probe returns named measurements or raises
:class:`ProbeSkipped` with the reason it does not apply here.

Inputs are always fresh random data: zeros let the tensor cores and the memory system run faster
than real data does, which would inflate every ceiling.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from aisp.harness.timing import gc_disabled, synchronize, time_call
from aisp.kits import native
from aisp.kits.collectives import size_label, sizes
from aisp.peak.allreduce import sweep

GIB = 1 << 30


class ProbeSkipped(Exception):
    """The probe does not apply on this machine; the message says why."""


def require_gpu(device: torch.device, what: str) -> None:
    """:class:`ProbeSkipped` unless ``device`` is a GPU (``what`` is a GPU figure)."""
    if device.type != "cuda":
        raise ProbeSkipped(f"no GPU: {what} is a GPU figure")


def gpu_library(device: torch.device, library: native.Library, signatures: dict[str, list[Any]], what: str) -> Any:
    """``library`` built and loaded for ``device``'s GPU, with ``signatures``; :class:`ProbeSkipped` on
    a CPU (``what`` is a GPU figure) or without nvcc."""
    require_gpu(device, what)
    if reason := native.unavailable(device):
        raise ProbeSkipped(reason)
    return library.load(device, signatures)


@dataclass(frozen=True)
class PeakConfig:
    """Sizes and repeat counts of one peak measurement."""

    matmul_n: int = 8192
    """Square matmul size on a GPU (8192³ fills an H100/H200)."""
    cpu_matmul_n: int = 2048
    """Square matmul size on a CPU."""
    matmul_iters: int = 5
    """Matmuls per timed sample."""
    repeats: int = 10
    """Timed samples per figure; the figure is their median (the L2 probe's: their best)."""
    copy_bytes: int = 1 * GIB
    """Buffer size of the device memory copy (read and write are both counted) and GPU<->GPU copies."""
    l2_passes: int = 256
    """In-place passes over a quarter of L2 in the L2 probe's CUDA graph (:mod:`aisp.peak.l2`): ~1 ms a
    replay on an H200, far above its launch."""
    transfer_bytes: int = 256 << 20
    """Buffer size of the host<->device copies."""
    host_bytes: int | None = None
    """Buffer size of the host memory probes and file size of the page-cache probe (:mod:`aisp.peak.host`);
    None: 4 x the last-level cache, at least 1 GiB (DRAM's figures, not the cache's)."""
    first_touch_bytes: int = 512 << 20
    """Size of the fresh anonymous mapping the first-touch (page-fault) probe faults in."""
    launch_kernels: int = 1000
    """Tiny kernels per timed window of the launch probes (and nodes of the graph probe)."""
    latency_calls: int = 1000
    """Back-to-back events (syncs, small copies, op dispatches, small all-reduces) per timed window
    of the latency probes."""
    allreduce_min_bytes: int = 1 << 20
    """Smallest all-reduce of the NCCL sweep (sizes x4 up to ``allreduce_max_bytes``; 2+ GPUs)."""
    allreduce_max_bytes: int = 1 * GIB
    """Largest all-reduce of the NCCL sweep."""
    compile: bool = True
    """Measure the torch.compile cold/warm compile baseline (seconds of work)."""


FULL = PeakConfig()
QUICK = PeakConfig(matmul_n=4096, cpu_matmul_n=1024, matmul_iters=2, repeats=3, copy_bytes=256 << 20, l2_passes=64,
                   transfer_bytes=64 << 20, host_bytes=256 << 20, first_touch_bytes=128 << 20, launch_kernels=200,
                   latency_calls=200, allreduce_max_bytes=64 << 20, compile=False)


def measurement(value: float, unit: str, detail: str) -> dict[str, Any]:
    return {"value": value, "unit": unit, "detail": detail}


def timed_ms(fn: Callable[[], Any], device: torch.device, repeats: int, warmup: int = 2) -> list[float]:
    """``repeats`` times of one call (ms) after ``warmup`` calls: CUDA events on a GPU, host clock on a CPU."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    with gc_disabled():
        return [time_call(fn, device).ms for _ in range(repeats)]


def median_ms(fn: Callable[[], Any], device: torch.device, repeats: int, warmup: int = 2) -> float:
    """Median over ``repeats`` of one call's time (ms), from :func:`timed_ms`."""
    return statistics.median(timed_ms(fn, device, repeats, warmup))


def captured_graph(device: torch.device, work: Callable[[], Any], count: int) -> torch.cuda.CUDAGraph:
    """``count`` calls of ``work`` captured in one CUDA graph on ``device``, after one call on a side
    stream outside the capture (its kernels warmed, as a capture needs)."""
    with torch.cuda.device(device):
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            work()
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(count):
                work()
    return graph


@contextmanager
def environ(**values: str):
    """Set environment variables inside the block; restore (or remove) them afterwards."""
    before = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


@contextmanager
def float32_precision(mode: str):
    """``highest``: true fp32 matmuls (TF32 off); ``high``: TF32 allowed. Restored afterwards."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(mode)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def _operands(dtype_name: str, n: int, device: torch.device) -> Callable[[], torch.Tensor]:
    """A closure computing one n×n×n product in ``dtype_name`` on fresh random operands."""
    if dtype_name == "fp8":
        a = torch.randn(n, n, device=device).to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device=device).to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt wants
        scale = torch.ones((), device=device)
        return lambda: torch._scaled_mm(a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)
    if dtype_name == "int8":
        a = torch.randint(-128, 128, (n, n), device=device, dtype=torch.int8)
        b = torch.randint(-128, 128, (n, n), device=device, dtype=torch.int8).t()  # column-major: IMMA path
        return lambda: torch._int_mm(a, b)
    dtype = {"fp64": torch.float64, "fp32": torch.float32, "tf32": torch.float32,
             "bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    out = torch.empty(n, n, device=device, dtype=dtype)
    return lambda: torch.matmul(a, b, out=out)


def matmul_dtypes(device: torch.device) -> dict[str, str | None]:
    """Each dtype probed here, mapped to None or the reason it is skipped."""
    if device.type != "cuda":
        gpu_only = "GPU only: the CPU ceiling is measured in fp32"
        return {"fp32": None, **{d: gpu_only for d in ("fp64", "tf32", "bf16", "fp16", "fp8", "int8")}}
    cc = torch.cuda.get_device_capability(device)
    fp8 = None if cc >= (8, 9) else f"fp8 tensor cores need compute capability 8.9+, this GPU is {cc[0]}.{cc[1]}"
    tensor = None if cc >= (8, 0) else "needs compute capability 8.0+"
    return {"fp64": None, "fp32": None, "tf32": tensor, "bf16": tensor, "fp16": None, "fp8": fp8,
            "int8": tensor}


def matmul(dtype_name: str, cfg: PeakConfig, device: torch.device) -> dict[str, Any]:
    """Dense n×n×n matmul rate in TFLOP/s (TOP/s for int8): 2n³ operations per product."""
    n = cfg.matmul_n if device.type == "cuda" else cfg.cpu_matmul_n
    with float32_precision("high" if dtype_name == "tf32" else "highest"):
        product = _operands(dtype_name, n, device)

        def loop() -> None:
            for _ in range(cfg.matmul_iters):
                product()

        ms = median_ms(loop, device, cfg.repeats) / cfg.matmul_iters
    unit = "TOP/s" if dtype_name == "int8" else "TFLOP/s"
    detail = f"{n}x{n}x{n} {dtype_name}, median of {cfg.repeats} x {cfg.matmul_iters} products"
    return measurement(2 * n**3 / (ms * 1e-3) / 1e12, unit, detail)


def memory_copy(cfg: PeakConfig, device: torch.device) -> dict[str, Any]:
    """Device memory bandwidth of a buffer copy in GB/s, counting the read and the write."""
    src = torch.rand(cfg.copy_bytes // 4, device=device)
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), device, cfg.repeats)
    detail = f"copy of {cfg.copy_bytes >> 20} MiB, read+write counted, median of {cfg.repeats}"
    return measurement(2 * cfg.copy_bytes / (ms * 1e-3) / 1e9, "GB/s", detail)


def transfers(cfg: PeakConfig, device: torch.device) -> dict[str, dict[str, Any]]:
    """Host<->device copy bandwidth in GB/s, from pinned and from pageable host memory."""
    if device.type != "cuda":
        raise ProbeSkipped("no GPU: there is no host<->device link to measure")
    count = cfg.transfer_bytes // 4
    gpu = torch.rand(count, device=device)
    pinned = torch.rand(count).pin_memory()
    pageable = torch.rand(count)
    copies = {
        "h2d_pinned": lambda: gpu.copy_(pinned, non_blocking=True),
        "h2d_pageable": lambda: gpu.copy_(pageable),
        "d2h_pinned": lambda: pinned.copy_(gpu, non_blocking=True),
        "d2h_pageable": lambda: pageable.copy_(gpu),
    }
    detail = f"{cfg.transfer_bytes >> 20} MiB, median of {cfg.repeats}"
    return {name: measurement(cfg.transfer_bytes / (median_ms(fn, device, cfg.repeats) * 1e-3) / 1e9,
                              "GB/s", detail) for name, fn in copies.items()}


def gpu_pair_count(device: torch.device) -> int:
    """The GPUs the GPU-to-GPU probes use: every local one. Raises :class:`ProbeSkipped` below two."""
    found = torch.cuda.device_count() if device.type == "cuda" and torch.cuda.is_available() else 0
    if found < 2:
        raise ProbeSkipped(f"needs 2 GPUs (found {found})")
    return found


def _seconds_on_both(fn: Callable[[], Any], repeats: int) -> float:
    """Median host time (s) of ``fn`` with GPUs 0 and 1 idle before and synchronized after it."""
    def once() -> float:
        torch.cuda.synchronize(0)
        torch.cuda.synchronize(1)
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize(0)
        torch.cuda.synchronize(1)
        return time.perf_counter() - t0

    once()
    once()
    with gc_disabled():
        return statistics.median(once() for _ in range(repeats))


def peer_copy(cfg: PeakConfig, device: torch.device) -> dict[str, dict[str, Any]]:
    """GPU 0 <-> GPU 1 copy bandwidth in GB/s: each direction alone, and both at once (their sum).

    ``p2p_copy`` is the per-direction ceiling (the faster direction), the one a workload whose
    bytes cross the GPU-GPU link (``link="nvlink"``) is judged against. ``dst.copy_(src)`` runs on
    the source GPU's current stream with peer access enabled by PyTorch; the reverse copy of the
    bidirectional run goes on a second pair of streams so the two overlap.
    """
    gpu_pair_count(device)
    nbytes = cfg.copy_bytes
    a0, b1 = torch.rand(nbytes // 4, device="cuda:0"), torch.rand(nbytes // 4, device="cuda:1")
    a1, b0 = torch.empty_like(a0, device="cuda:1"), torch.empty_like(b1, device="cuda:0")
    back0, back1 = torch.cuda.Stream("cuda:0"), torch.cuda.Stream("cuda:1")

    def reverse() -> None:
        with torch.cuda.stream(back0), torch.cuda.stream(back1):
            b0.copy_(b1)

    def both() -> None:
        a1.copy_(a0)
        reverse()

    peer = ("peer access" if torch.cuda.can_device_access_peer(0, 1) and torch.cuda.can_device_access_peer(1, 0)
            else "no peer access (staged through the host)")
    how = f"{nbytes >> 20} MiB, {peer}, median of {cfg.repeats}"
    rates = {"0to1": nbytes / _seconds_on_both(lambda: a1.copy_(a0), cfg.repeats) / 1e9,
             "1to0": nbytes / _seconds_on_both(lambda: b0.copy_(b1), cfg.repeats) / 1e9,
             "bidir": 2 * nbytes / _seconds_on_both(both, cfg.repeats) / 1e9}
    return {
        "p2p_copy": measurement(max(rates["0to1"], rates["1to0"]), "GB/s",
                                f"GPU-GPU, per direction: the faster of cuda:0->cuda:1 ({rates['0to1']:.1f}) "
                                f"and cuda:1->cuda:0 ({rates['1to0']:.1f}); {how}"),
        "p2p_copy_0to1": measurement(rates["0to1"], "GB/s", f"cuda:0 -> cuda:1, {how}"),
        "p2p_copy_1to0": measurement(rates["1to0"], "GB/s", f"cuda:1 -> cuda:0, {how}"),
        "p2p_copy_bidir": measurement(rates["bidir"], "GB/s",
                                      f"both directions at once, bytes of both counted, {how}"),
    }


def nccl_allreduce(cfg: PeakConfig, device: torch.device) -> dict[str, dict[str, Any]]:
    """NCCL all-reduce bus bandwidth (nccl-tests' busbw = algbw x 2(n-1)/n) over every local GPU,
    one figure per message size from ``allreduce_min_bytes`` to ``allreduce_max_bytes`` (x4), and
    ``allreduce_busbw``, the best of them. fp32 buffers; NVLink multicast (NVLS) off."""
    ranks = gpu_pair_count(device)
    rows = sweep(ranks, "cuda", sizes(cfg.allreduce_min_bytes, cfg.allreduce_max_bytes, 4), cfg.repeats)
    how = f"NCCL all-reduce, {ranks} ranks, fp32, NVLS off, median of {cfg.repeats} bursts"
    found = {f"allreduce_busbw_{size_label(r.bytes)}": measurement(
        r.busbw_gbs, "GB/s", f"{how}; algbw {r.algbw_gbs:.1f} GB/s, {r.time_us:,.1f} us per call") for r in rows}
    best = max(rows, key=lambda r: r.busbw_gbs)
    return {"allreduce_busbw": measurement(best.busbw_gbs, "GB/s",
                                           f"{how}; best of {len(rows)} sizes, at {size_label(best.bytes)}"),
            **found}


def _compile_target(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x) * x.sin() + x.cos().sum()


def compile_time(cfg: PeakConfig, device: torch.device) -> dict[str, dict[str, Any]]:
    """Seconds to torch.compile a small function: on an empty cache, then again with it warm."""
    if not cfg.compile:
        raise ProbeSkipped("not measured in --quick (a cold compile takes seconds)")
    from torch._inductor.runtime.cache_dir_utils import temporary_cache_dir
    from torch._inductor.utils import clear_caches

    x = torch.randn(1 << 16, device=device)
    seconds = []
    with (tempfile.TemporaryDirectory(prefix="aisp_peak_compile_") as cache, temporary_cache_dir(cache),
          environ(TRITON_CACHE_DIR=os.path.join(cache, "triton"))):
        for _ in range(2):
            torch._dynamo.reset()
            clear_caches()
            t0 = time.perf_counter()
            torch.compile(_compile_target)(x)
            synchronize(device)
            seconds.append(time.perf_counter() - t0)
    torch._dynamo.reset()
    detail = "gelu(x)*sin(x)+sum(cos(x)) on 64K floats, private cache dir"
    return {"compile_cold": measurement(seconds[0], "s", "empty cache; " + detail),
            "compile_warm": measurement(seconds[1], "s", "cache hit after dynamo reset: " + detail)}
