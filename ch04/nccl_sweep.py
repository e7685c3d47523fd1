"""NCCL collective sweep, as nccl-tests reports it: time, algorithm and bus bandwidth per message size.

Each of all-reduce, all-gather, reduce-scatter and all-to-all runs on fp32 buffers from 8 B to 1 GiB
(sizes x2). ``size`` follows nccl-tests: the all-reduce buffer, the all-gather's output, the
reduce-scatter's input, each rank's all-to-all buffer. ``algbw = size / time``; ``busbw = algbw x
factor``, the factor making it comparable with the link's bandwidth whatever the rank count:
2(n-1)/n for all-reduce, (n-1)/n for the others. A sample: back-to-back calls moving ~256 MB (1-50)
after a barrier, the slowest rank's time; the median of ``--samples``. NVLink multicast stays off.

Run: torchrun --nproc-per-node 2 ch04/nccl_sweep.py [--max-bytes 1G] [--png sweep.png] [--json sweep.json]
     torchrun --nproc-per-node 2 ch04/nccl_sweep.py --device cpu --max-bytes 64K   (gloo, for a check)
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
import torch.distributed as dist

from aisp.kits.multirank import script_init, time_slowest, world_and_rank

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


def sizes(low: int, high: int, factor: int = 2) -> list[int]:
    return [low * factor**i for i in range(64) if low * factor**i <= high]


def row(op: str, nbytes: int, ranks: int, seconds: float) -> Row:
    """A measurement in nccl-tests' units (GB/s = 1e9 bytes per second)."""
    algbw = nbytes / seconds / 1e9
    factor = 2 * (ranks - 1) / ranks if op == "all_reduce" else (ranks - 1) / ranks
    return Row(op, nbytes, ranks, seconds * 1e6, algbw, algbw * factor)


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
    ranks = world_and_rank()[0]
    used, call = collective(op, nbytes, ranks, device)
    iters = max(1, min(50, TARGET_BYTES_PER_SAMPLE // used))

    def burst() -> None:
        for _ in range(iters):
            call()

    burst()  # warm-up: connections, buffers
    ms = statistics.median(time_slowest(burst, device, samples))
    return row(op, used, ranks, ms / 1e3 / iters)


def print_table(rows: list[Row]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"collectives over {rows[0].ranks} ranks (fp32)" if rows else "no rows")
    for name in ("op", "bytes", "time (us)", "algbw (GB/s)", "busbw (GB/s)"):
        table.add_column(name, justify="left" if name == "op" else "right")
    for r in rows:
        table.add_row(r.op, f"{r.bytes:,}", f"{r.time_us:,.1f}", f"{r.algbw_gbs:.4g}", f"{r.busbw_gbs:.4g}")
    Console().print(table)


def plot(rows: list[Row], path: str) -> None:
    """Bus bandwidth against message size, one line per collective."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for op in OPS:
        mine = [r for r in rows if r.op == op]
        if mine:
            ax.plot([r.bytes for r in mine], [r.busbw_gbs for r in mine], marker="o", label=op)
    ax.set_xscale("log", base=2)
    ax.set(xlabel="message size (bytes)", ylabel="bus bandwidth (GB/s)",
           title=f"collective bus bandwidth, {rows[0].ranks} ranks" if rows else "")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-bytes", default="8")
    ap.add_argument("--max-bytes", default="1G")
    ap.add_argument("--factor", type=int, default=2)
    ap.add_argument("--ops", nargs="+", choices=OPS, default=list(OPS))
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    ap.add_argument("--png", help="write the bus-bandwidth plot here (rank 0)")
    ap.add_argument("--json", help="write the rows here (rank 0)")
    args = ap.parse_args(argv)
    device = script_init(args.device)
    rows = [measure(op, n, device, args.samples) for op in args.ops
            for n in sizes(parse_size(args.min_bytes), parse_size(args.max_bytes), args.factor)]
    if world_and_rank()[1] == 0:
        print_table(rows)
        if args.json:
            with open(args.json, "w") as f:
                json.dump([asdict(r) for r in rows], f, indent=1)
        if args.png:
            plot(rows, args.png)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
