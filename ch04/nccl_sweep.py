"""NCCL collective sweep, as nccl-tests reports it: time, algorithm and bus bandwidth per message size.

Each of all-reduce, all-gather, reduce-scatter and all-to-all runs on fp32 buffers from 8 B to 1 GiB
(sizes x2). ``size`` follows nccl-tests: the all-reduce buffer, the all-gather's output, the
reduce-scatter's input, each rank's all-to-all buffer. ``algbw = size / time``; ``busbw = algbw x
factor``, the factor making it comparable with the link's bandwidth whatever the rank count:
2(n-1)/n for all-reduce, (n-1)/n for the others. A sample: back-to-back calls moving ~256 MB (1-50)
after a barrier, the slowest rank's time; the median of ``--samples``. NVLink multicast stays off.
The measurement and its arithmetic live in ``aisp.kits.collectives`` (``aisp peak`` uses them too).

Run: torchrun --nproc-per-node 2 ch04/nccl_sweep.py [--max-bytes 1G] [--png sweep.png] [--json sweep.json]
     torchrun --nproc-per-node 2 ch04/nccl_sweep.py --device cpu --max-bytes 64K   (gloo, for a check)
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

import torch.distributed as dist

from aisp.kits.collectives import OPS, Row, collective, measure, parse_size, row, sizes
from aisp.kits.multirank import script_init, world_and_rank

__all__ = ["OPS", "Row", "collective", "main", "measure", "parse_size", "plot", "print_table", "row", "sizes"]


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
    ap.add_argument("--min-bytes", default="8", help="smallest message (8, 64K, 1M, 1G)")
    ap.add_argument("--max-bytes", default="1G", help="largest message (same units)")
    ap.add_argument("--factor", type=int, default=2, help="each message size is the previous one times this")
    ap.add_argument("--ops", nargs="+", choices=OPS, default=list(OPS), help="collectives to sweep")
    ap.add_argument("--samples", type=int, default=5, help="timed repeats per size; the median is reported")
    ap.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto", help="auto (CUDA with NCCL when present), cuda or cpu (gloo)")
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
