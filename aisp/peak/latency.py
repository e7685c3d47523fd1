"""Latency ceilings: what one launch, graph node, sync, small copy, small all-reduce or torch op dispatch costs.

The bandwidth and FLOP ceilings say nothing about a lesson whose time goes to launching many tiny
kernels, waiting on the GPU or sending small messages; these figures are the floor of each such
event, so a pair that declares how many it needs (:class:`aisp.harness.benchmark.LatencyCounts`)
gets a ceiling too. Each figure is measured the way nccl-tests measures latency: many events back
to back between two syncs, the window divided by their count (a sync per event would add the
sync's own round trip to every figure); the median of ``repeats`` windows. All in microseconds.
"""

from __future__ import annotations

import ctypes
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from aisp.harness import host
from aisp.harness.timing import gc_disabled, synchronize
from aisp.kits import native
from aisp.kits.collectives import size_label
from aisp.peak.allreduce import sweep
from aisp.peak.probes import ProbeSkipped, captured_graph, gpu_library, require_gpu

SMALL_COPY_BYTES = 8
"""Size of the small copies: one 8-byte scalar, a flag or a token id moved between host and GPU."""
ALLREDUCE_LATENCY_BYTES = (8, 1024, 64 << 10)
"""Message sizes of the small all-reduce latency figures; the 8-byte one is ``allreduce_latency``."""
GRAPH_SWEEP_S = 120.0
"""Time limit of the graph-captured sweep: a capture that hangs falls back to the eager figures."""
DEPENDENT_NODE = native.Library((Path(__file__).with_name("dependent_node.cu"),))
"""The one-thread read-modify-write kernel of :func:`dependent_nodes`."""


def host_us_per_call(fn: Callable[[], Any], device: torch.device, calls: int, repeats: int) -> float:
    """Median over ``repeats`` windows of the host time (µs) per call of ``calls`` back-to-back
    calls of ``fn``, each window between two device syncs (a no-op on a CPU); one window warms up."""
    def window() -> float:
        synchronize(device)
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        synchronize(device)
        return (time.perf_counter() - t0) * 1e6 / calls

    window()
    with gc_disabled():
        return statistics.median(window() for _ in range(repeats))


def check_counted(counted: int, per_call: int, calls: int, repeats: int, what: str) -> None:
    """RuntimeError unless the device counted ``per_call`` events for every call of
    :func:`host_us_per_call` (its warm-up window and ``repeats`` timed ones, ``calls`` each): a launch
    the device refused must not read as a fast one."""
    expected = (repeats + 1) * calls * per_call
    if counted != expected:
        raise RuntimeError(f"{what}: {counted} ran, {expected} were launched")


def figure(value: float, detail: str) -> dict[str, Any]:
    return {"value": value, "unit": "us", "detail": detail}


def dispatch(calls: int, repeats: int) -> dict[str, dict[str, Any]]:
    """Host cost of one torch op from Python (binding, dispatcher, a one-element CPU kernel): the
    part of an eager GPU launch that is Python and PyTorch, measured on the CPU on every machine.
    The harness's own probe (:func:`aisp.harness.host.dispatch_us`), which every pair's worker also
    reads to tell hosts of one CPU model apart."""
    us = host.dispatch_us(calls, repeats)
    return {"dispatch_torch_op": figure(us, f"x.add_(1) on a 1-element CPU tensor, {calls} back to back, "
                                            f"median of {repeats}")}


def _empty_kernel() -> None:
    torch.cuda._sleep(0)  # a spin kernel told to spin 0 cycles: a launch with no work in it


def launches(device: torch.device, kernels: int, repeats: int) -> dict[str, dict[str, Any]]:
    """One empty kernel launched eagerly from Python; one launch of a one-kernel CUDA graph; and
    each further node of a ``kernels``-node graph (its replay time divided by the nodes).

    The kernel is empty so the figures are the launch path's own floor, one a real kernel cannot
    beat: a torch op launched eagerly also pays its dispatch (``dispatch_torch_op``), and a graph
    node its kernel's own time."""
    require_gpu(device, "kernel launch latency")

    one, many = captured_graph(device, _empty_kernel, 1), captured_graph(device, _empty_kernel, kernels)
    how = f"median of {repeats} windows"
    with torch.cuda.device(device):
        return {
            "launch_eager": figure(host_us_per_call(_empty_kernel, device, kernels, repeats),
                                   f"an empty kernel launched from Python, {kernels} back to back, {how}"),
            "launch_graph": figure(host_us_per_call(one.replay, device, kernels, repeats),
                                   f"replay of a 1-kernel graph, {kernels} back to back, {how}"),
            "launch_graph_node": figure(host_us_per_call(many.replay, device, 1, repeats) / kernels,
                                        f"one replay of a {kernels}-empty-kernel graph / {kernels}, {how}"),
        }


def dependent_nodes(device: torch.device, kernels: int, repeats: int) -> dict[str, dict[str, Any]]:
    """Each node of a ``kernels``-node graph whose every node reads the value the node before it wrote
    and writes the one the next reads: ``dependent_node.cu``'s one-thread ``*x += 1`` on one int32,
    captured ``kernels`` times (a dependent read-modify-write chain), one replay / ``kernels``, timed as
    ``launch_graph_node`` is.

    An empty node is a floor no real kernel beats; a node on its predecessor's output also waits for
    that grid's completion and the flush of its store, then loads it: this is that floor, the one a
    chain of tiny dependent kernels (``dependent_graph_nodes``) is priced at. A hand-written kernel, not
    a torch op: torch's elementwise kernel costs more per node (a graph of 1,000 in-place ``x.mul_`` on
    256 floats read 1.20 µs a node on an H200, ``ch12:graph_replay``'s own kernels 0.98-1.03 µs), and a
    floor above a real chain would not be one. The adds are counted."""
    lib = gpu_library(device, DEPENDENT_NODE, {"bump_launch": [ctypes.c_void_p, ctypes.c_void_p]},
                      "dependent graph node latency")
    with torch.cuda.device(device):
        x = torch.zeros(1, dtype=torch.int32, device=device)
        graph = captured_graph(device, lambda: native.check(lib.bump_launch(native.ptr(x), native.stream(device)),
                                                            "bump_launch"), kernels)
        x.zero_()  # the capture's warm-up call added one
        us = host_us_per_call(graph.replay, device, 1, repeats) / kernels
        check_counted(int(x.item()), kernels, 1, repeats, "dependent graph nodes")
    return {"launch_graph_node_dependent": figure(
        us, f"one replay of a {kernels}-node graph of a one-thread *x += 1 on one int32 (each node reads what the "
            f"last wrote) / {kernels}, median of {repeats} windows")}


def sync_roundtrip(device: torch.device, calls: int, repeats: int) -> dict[str, dict[str, Any]]:
    """Event record then a host wait on it, on an idle stream: the floor of every ``.item()``,
    ``synchronize()`` or blocking copy a loop does."""
    require_gpu(device, "the sync round trip")
    event = torch.cuda.Event()

    def record_and_wait() -> None:
        event.record()
        event.synchronize()

    return {"sync_roundtrip": figure(host_us_per_call(record_and_wait, device, calls, repeats),
                                     f"event record + event synchronize on an idle stream, {calls} in a row, "
                                     f"median of {repeats}")}


def small_copies(device: torch.device, calls: int, repeats: int) -> dict[str, dict[str, Any]]:
    """An 8-byte copy host->device and device->host (pinned, asynchronous) and device->device."""
    require_gpu(device, "small-copy latency")
    n = SMALL_COPY_BYTES // 8
    host = torch.zeros(n, dtype=torch.float64).pin_memory()
    gpu_a = torch.zeros(n, dtype=torch.float64, device=device)
    gpu_b = torch.zeros_like(gpu_a)
    copies = {"copy_h2d_small": (lambda: gpu_a.copy_(host, non_blocking=True), "pinned host -> device"),
              "copy_d2h_small": (lambda: host.copy_(gpu_a, non_blocking=True), "device -> pinned host"),
              "copy_d2d_small": (lambda: gpu_b.copy_(gpu_a), "device -> device")}
    return {name: figure(host_us_per_call(fn, device, calls, repeats),
                         f"{SMALL_COPY_BYTES} B {how}, {calls} back to back, median of {repeats}")
            for name, (fn, how) in copies.items()}


def allreduce(device: torch.device, calls: int, repeats: int) -> dict[str, dict[str, Any]]:
    """NCCL all-reduce time per call of small messages over every local GPU, ``calls`` back to
    back between two syncs (nccl-tests' way). Measured twice: issued one by one from Python
    (``allreduce_eager_<size>``: torch's host-side cost per call included) and replayed from a
    CUDA graph (``allreduce_latency_<size>``: the device's floor, what nccl-tests reports). The
    8-byte graph figure is ``allreduce_latency``, the floor a pair's ``messages`` are priced at;
    where capture fails, the eager figures stand in, and their detail says so."""
    return _small_collective("all_reduce", "allreduce", device, calls, repeats)


def alltoall(device: torch.device, calls: int, repeats: int) -> dict[str, dict[str, Any]]:
    """The same for NCCL all-to-all (``all_to_all_single``, an MoE layer's dispatch and combine):
    ``alltoall_latency`` (8 B in all, graph-replayed where capture works) is the floor a pair's
    ``all_to_alls`` are priced at, ``alltoall_eager_<size>`` and ``alltoall_latency_<size>`` beside it."""
    return _small_collective("all_to_all", "alltoall", device, calls, repeats)


def _small_collective(op: str, prefix: str, device: torch.device, calls: int,
                      repeats: int) -> dict[str, dict[str, Any]]:
    found = torch.cuda.device_count() if device.type == "cuda" else 0
    if found < 2:
        raise ProbeSkipped(f"needs 2 GPUs (found {found})")
    sizes = list(ALLREDUCE_LATENCY_BYTES)
    how = f"NCCL {op.replace('_', '-')}, {found} ranks, fp32, NVLS off, {calls} back to back, median of {repeats}"
    eager = sweep(found, "cuda", sizes, repeats, burst=calls, op=op)
    figures = {f"{prefix}_eager_{size_label(r.bytes)}": figure(r.time_us, f"issued from Python; {how}")
               for r in eager}
    try:
        graphed, graph_how = sweep(found, "cuda", sizes, repeats, timeout_s=GRAPH_SWEEP_S, burst=calls,
                                   graph=True, op=op), f"replayed from a CUDA graph; {how}"
    except RuntimeError as exc:
        graphed, graph_how = eager, f"issued from Python (graph capture failed: {str(exc)[:120]}); {how}"
    figures |= {f"{prefix}_latency_{size_label(r.bytes)}": figure(r.time_us, graph_how) for r in graphed}
    first = graphed[0]
    return {f"{prefix}_latency": figure(first.time_us, f"{size_label(first.bytes)}; {graph_how}"), **figures}
