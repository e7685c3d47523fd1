"""Where a multi-GPU pair's time goes, variant by variant: collectives against compute on the GPU.

The harness times multi-rank pairs (`aisp profile run -t` traces every rank); this tool adds the overlap split. Every
rank sets up each variant, warms it up and times it (the slowest rank's time: per call, with a
sync around each call as the harness times, and back to back, as a training loop runs); then
every rank records ``--steps`` calls under torch.profiler and rank 0 writes its Chrome trace. From
the trace, per call: the GPU span, the busy time of collective kernels (NCCL, symmetric memory),
GEMMs, copies and other kernels, the collective time that overlaps compute, the GPU's idle time,
and the top kernels. That is how chapter 4 found why overlap buys little on NVLink (README,
examples 3 and 7): overlapped collectives ran 2-3x longer and persistent GEMMs ran a second wave.
Run: torchrun --nproc-per-node 2 ch04/overlap_profile.py -t ch04:ddp_overlap_multigpu [--out DIR]
     [--steps 4] [--iterations 20] [--root DIR] [--device cpu]   (exit 2: bad target or not a rank)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from ch04_overlap import kind, timeline

from aisp.harness.discovery import TargetError, resolve_targets
from aisp.harness.loader import import_module_at
from aisp.harness.timing import synchronize, time_call
from aisp.kits.multirank import script_init, time_slowest
from aisp.profile.trace_events import load_events

REPO = Path(__file__).resolve().parents[1]
__all__ = ["kind", "main", "timeline"]  # kind and timeline: from ch04_overlap, for the tests


def back_to_back_ms(bench, device: torch.device, calls: int) -> float:
    """Wall ms per call of ``calls`` calls issued without a sync between them (slowest rank)."""
    dist.barrier()
    worst = torch.tensor([time_call(bench.run, device, calls).host_ms], dtype=torch.float64, device=device)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    return float(worst)


def profile_variant(path: Path, device: torch.device, args: argparse.Namespace) -> dict:
    bench = import_module_at(path).get_benchmark()
    bench.device, bench.seed = device, 0
    bench.setup()
    for _ in range(args.warmup):
        bench.run()
    samples = sorted(time_slowest(bench.run, device, args.iterations))
    row = {"variant": path.stem, "per_call_ms": samples[len(samples) // 2],
           "back_to_back_ms": back_to_back_ms(bench, device, args.iterations)}
    activities = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if device.type == "cuda" else [])
    dist.barrier()
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(args.steps):
            bench.run()
        synchronize(device)
    if dist.get_rank() == 0:
        trace = args.out / f"{path.stem}.trace.json"
        prof.export_chrome_trace(str(trace))
        row |= timeline(load_events(trace), args.steps) | {"trace": str(trace)}
    bench.teardown()
    del bench
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return row


def print_rows(rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="per call, ms (slowest rank; the trace is rank 0's)")
    for col in ("variant", "per call", "back to back", "GPU span", "comm", "comm beside compute", "gemm",
                "other", "copy", "idle"):
        table.add_column(col, justify="left" if col == "variant" else "right")
    for r in rows:
        busy = r["busy_ms"]
        table.add_row(r["variant"], *(f"{v:.3f}" for v in (r["per_call_ms"], r["back_to_back_ms"], r["span_ms"],
                      busy["comm"], r["comm_overlap_ms"], busy["gemm"], busy["other"], busy["copy"], r["idle_ms"])))
    console = Console()
    console.print(table)
    for r in rows:
        console.print(f"[bold]{r['variant']}[/bold] top kernels: " + "; ".join(f"{t:.3f} {n}" for n, t in r["top"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-t", "--target", required=True, help="one pair, e.g. ch04:ddp_overlap_multigpu")
    parser.add_argument("--root", type=Path, action="append", default=[], help="a folder of your own pairs")
    parser.add_argument("--out", type=Path, default=Path("artifacts/overlap_profile"), help="folder for the traces and the summary")
    parser.add_argument("--steps", type=int, default=4, help="profiled calls per variant")
    parser.add_argument("--iterations", type=int, default=20, help="timed calls per variant")
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls per variant first")
    parser.add_argument("--device", default="auto", help="auto, cuda or cpu (gloo)")
    args = parser.parse_args(argv)
    if "RANK" not in os.environ:
        print(f"overlap_profile: run it under torchrun: torchrun --nproc-per-node 2 {sys.argv[0]} -t {args.target}")
        return 2
    try:
        pairs = resolve_targets([args.target], REPO, tuple(args.root))
    except TargetError as err:
        print(f"overlap_profile: {err}")
        return 2
    if len(pairs) != 1 or pairs[0].problem:
        print(f"overlap_profile: {args.target} must name one complete pair (chNN:name)")
        return 2
    device = script_init(args.device)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [profile_variant(path, device, args) for path in (pairs[0].baseline, *pairs[0].optimized)]
    if dist.get_rank() == 0:
        (args.out / "overlap_profile.json").write_text(json.dumps(rows, indent=1))
        print_rows(rows)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
