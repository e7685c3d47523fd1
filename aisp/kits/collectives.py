"""Collective bandwidth as nccl-tests reports it: time, algorithm bandwidth and bus bandwidth.

``size`` follows nccl-tests: the all-reduce buffer, the all-gather's output, the reduce-scatter's
input, each rank's all-to-all buffer. ``algbw = size / time``; ``busbw = algbw x factor``, the
factor making it comparable with the link's bandwidth whatever the rank count: 2(n-1)/n for
all-reduce, (n-1)/n for the others (nccl-tests' doc/PERFORMANCE.md). A sample: back-to-back calls
moving ~256 MB (1-50) after a barrier, the slowest rank's time. Shared by ``aisp peak`` (the NCCL
all-reduce ceiling) and ch04's ``nccl_sweep.py``.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from aisp.kits.multirank import time_slowest, world_and_rank

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
UNITS = {"K": 2**10, "M": 2**20, "G": 2**30}
TARGET_BYTES_PER_SAMPLE = 256 * 2**20
"""Calls per sample: enough to move about this much (at least 1, at most 50), as nccl-tests loops."""


@dataclass(frozen=True)
class Row:
    op: str
    bytes: int
    ranks: int
    time_us: float
    algbw_gbs: float
    busbw_gbs: float


def parse_size(text: str) -> int:
    """'8', '64K', '1G' -> bytes."""
    unit = UNITS.get(text[-1].upper(), 1)
    return int(text[:-1] if unit > 1 else text) * unit


def size_label(nbytes: int) -> str:
    """1048576 -> '1MiB', 65536 -> '64KiB', 8 -> '8B' (exact multiples only; else bytes)."""
    for suffix, unit in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= unit and nbytes % unit == 0:
            return f"{nbytes // unit}{suffix}"
    return f"{nbytes}B"


def sizes(low: int, high: int, factor: int = 2) -> list[int]:
    return [low * factor**i for i in range(64) if low * factor**i <= high]


def bus_factor(op: str, ranks: int) -> float:
    """nccl-tests' busbw / algbw: 2(n-1)/n for all-reduce, (n-1)/n for the other collectives."""
    return 2 * (ranks - 1) / ranks if op == "all_reduce" else (ranks - 1) / ranks


def row(op: str, nbytes: int, ranks: int, seconds: float) -> Row:
    """A measurement in nccl-tests' units (GB/s = 1e9 bytes per second)."""
    algbw = nbytes / seconds / 1e9
    return Row(op, nbytes, ranks, seconds * 1e6, algbw, algbw * bus_factor(op, ranks))


def collective(op: str, nbytes: int, ranks: int, device: torch.device) -> tuple[int, Callable[[], object]]:
    """(bytes actually used, a call of ``op`` on fp32 buffers of that size). The element count is
    rounded down to a multiple of the rank count (at least one element per rank)."""
    count = max(ranks, nbytes // 4 // ranks * ranks)
    full = torch.ones(count, device=device)
    if op == "all_reduce":
        return count * 4, lambda: dist.all_reduce(full)
    if op == "all_to_all":
        source = torch.ones(count, device=device)
        return count * 4, lambda: dist.all_to_all_single(full, source)
    part = torch.ones(count // ranks, device=device)
    if op == "all_gather":
        return count * 4, lambda: dist.all_gather_into_tensor(full, part)
    return count * 4, lambda: dist.reduce_scatter_tensor(part, full)


def measure(op: str, nbytes: int, device: torch.device, samples: int) -> Row:
    """One size of one collective on every rank of the default group: the median of ``samples``
    slowest-rank bursts, per call. Every rank must call it with the same arguments."""
    ranks = world_and_rank()[0]
    used, call = collective(op, nbytes, ranks, device)
    iters = max(1, min(50, TARGET_BYTES_PER_SAMPLE // used))

    def burst() -> None:
        for _ in range(iters):
            call()

    burst()  # warm-up: connections, buffers
    ms = statistics.median(time_slowest(burst, device, samples))
    return row(op, used, ranks, ms / 1e3 / iters)
