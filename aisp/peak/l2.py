"""L2 bandwidth ceiling: elementwise passes over a buffer that stays in the GPU's L2 cache.

A lesson that keeps its data in L2 (``ch02:l2_blocking``: eight passes over each L2-sized chunk) is
bound by L2, not HBM: ``Workload.link="l2"`` prices its bytes at ``l2_bandwidth``
(:data:`aisp.report.roofline.LINK_PEAKS`). The buffer is a quarter of the L2 the device reports
(:data:`L2_SHARE`, as the pair's chunks are), so it stays resident from pass to pass. Each pass is one
in-place elementwise kernel, ``x.mul_(-1)``: the pair's kind of kernel, and a sign flip keeps the data
random. ``PeakConfig.l2_passes`` passes are captured in one CUDA graph, so launches do not dominate,
and one replay is timed; each pass reads and writes the buffer and both are counted, as
``memory_copy`` counts HBM. The figure is the best of ``repeats`` replays: the rate L2 can serve such
passes at (a slower replay is the clocks or a neighbour on the GPU, not L2).

Beside it, ``l2_bandwidth_read``: the same buffer read by a sum (``torch.sum``, one reduction kernel
a pass), reads counted. It prices no link; it says how much of the read+write figure the writes cost.
The arithmetic (:func:`buffer_bytes`, :func:`l2_figure`) is pure, so it is tested on a CPU.
"""

from __future__ import annotations

from typing import Any

import torch

from aisp.peak.probes import PeakConfig, captured_graph, measurement, require_gpu, timed_ms

L2_SHARE = 4
"""The buffer is this fraction of L2 (1/4): ``ch02:l2_blocking``'s chunk, leaving room for Hopper's
two L2 partitions and whatever else the GPU keeps there."""
ELEMENT_BYTES = 4
"""fp32 elements."""


def buffer_bytes(l2_bytes: int) -> int:
    """Bytes of the probe's buffer for an L2 of ``l2_bytes``: L2 / :data:`L2_SHARE`, a multiple of 1,024
    fp32 elements (4 KiB), at least one such block."""
    block = 1024 * ELEMENT_BYTES
    return max(block, l2_bytes // L2_SHARE // block * block)


def l2_figure(nbytes: int, passes: int, samples_ms: list[float], counted: int, how: str) -> dict[str, Any]:
    """The measurement (GB/s) of ``passes`` passes over ``nbytes``, one graph replay a sample: each pass
    moves ``counted`` x ``nbytes`` (2: read and write, 1: read), at the best (shortest) of ``samples_ms``."""
    best = min(samples_ms)
    gbps = counted * nbytes * passes / (best * 1e-3) / 1e9
    detail = f"{how}: {passes} passes over {nbytes / 2**20:g} MiB in one CUDA graph, best of {len(samples_ms)} replays"
    return measurement(gbps, "GB/s", detail)


def l2_bandwidth(cfg: PeakConfig, device: torch.device) -> dict[str, dict[str, Any]]:
    """``l2_bandwidth`` (in-place read+write passes) and ``l2_bandwidth_read`` (reads of a sum) in GB/s
    over a buffer of a quarter of L2; :class:`~aisp.peak.probes.ProbeSkipped` on a CPU."""
    require_gpu(device, "the L2 bandwidth")
    l2 = torch.cuda.get_device_properties(device).L2_cache_size
    nbytes, passes = buffer_bytes(l2), cfg.l2_passes
    where = f"buffer 1/{L2_SHARE} of the {l2 / 2**20:g} MiB L2"
    with torch.cuda.device(device):
        x = torch.randn(nbytes // ELEMENT_BYTES, device=device)
        total = torch.empty((), device=device)
        flips = captured_graph(device, lambda: x.mul_(-1.0), passes)
        sums = captured_graph(device, lambda: torch.sum(x, 0, out=total), passes)
        written = timed_ms(flips.replay, device, cfg.repeats)
        read = timed_ms(sums.replay, device, cfg.repeats)
    return {"l2_bandwidth": l2_figure(nbytes, passes, written, 2, f"in-place x.mul_(-1), read+write counted, {where}"),
            "l2_bandwidth_read": l2_figure(nbytes, passes, read, 1, f"torch.sum(x), reads counted, {where}")}
