"""Context parallelism as a tool: all-gather vs ring attention over a range of sequence lengths.

For each length, the sequence is sharded across the ranks torchrun starts; each rank computes
its queries' attention over the whole sequence both ways (context_parallel_common: the pair
ch13:context_parallel_multigpu at one size), the two outputs are checked against each other on
every rank, and rank 0 prints: the slowest rank's median time of each, the speedup, and the peak
memory one call adds on the worst rank (CUDA). The all-gather's memory grows with the whole
sequence (world x one block of K and V, twice: the gathered list and the concatenation); the
ring's with one block, whatever the world size.

Run: torchrun --nproc-per-node 2 ch13/context_parallelism.py --seq-per-rank 2048 8192 32768
     torchrun --nproc-per-node 3 ch13/context_parallelism.py --device cpu --dtype fp32 --heads 2 \\
         --head-dim 16 --seq-per-rank 64 256    (CPU, gloo)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from baseline_context_parallel_multigpu import AllGatherAttention
from context_parallel_common import cp_workload
from optimized_context_parallel_multigpu import RingAttention

import aisp
from aisp.harness.stats import summarize
from aisp.harness.verify import VerificationError, compare, detach_copy
from aisp.kits.multirank import script_init, time_slowest


def _bench(cls: type[aisp.Benchmark], workload: aisp.Workload, device: torch.device) -> aisp.Benchmark:
    bench = cls()
    bench.workload, bench.device, bench.seed = workload, device, 0
    bench.setup()
    return bench


def _peak_of_call(bench: aisp.Benchmark, device: torch.device) -> int | None:
    """Bytes one run() allocates beyond what is resident, worst rank; None on a CPU."""
    if device.type != "cuda":
        return None
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    bench.run()
    torch.cuda.synchronize(device)
    peak = torch.tensor([torch.cuda.max_memory_allocated(device) - before], device=device)
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)
    return int(peak.item())


def measure(seq_per_rank: int, args: argparse.Namespace, device: torch.device) -> dict[str, object]:
    """Check and time both ways at one length; every rank returns the same row."""
    workload = cp_workload(batch=args.batch, heads=args.heads, seq_per_rank=seq_per_rank,
                           head_dim=args.head_dim, world=dist.get_world_size(), dtype=args.dtype)
    gather, ring = _bench(AllGatherAttention, workload, device), _bench(RingAttention, workload, device)
    error = ""
    try:
        evidence = compare(detach_copy(gather.run()), detach_copy(ring.run()), workload)
    except VerificationError as exc:
        error = str(exc)
    failed = torch.tensor([1 if error else 0], device=device)
    dist.all_reduce(failed, op=dist.ReduceOp.MAX)
    row: dict[str, object] = {"seq_per_rank": seq_per_rank, "seq": seq_per_rank * dist.get_world_size(),
                              "match": not bool(failed.item())}
    if failed.item():
        return {**row, "error": error or "outputs differ on another rank"}
    for name, bench in (("allgather", gather), ("ring", ring)):
        for _ in range(args.warmup):
            bench.run()
        row[f"{name}_ms"] = summarize(time_slowest(bench.run, device, args.iterations)).median
        row[f"{name}_call_peak_bytes"] = _peak_of_call(bench, device)
    row["speedup"] = row["allgather_ms"] / row["ring_ms"]
    row["max_abs_err"] = evidence.max_abs_err
    return row


def _print(rows: list[dict[str, object]]) -> None:
    print(f"{'seq':>8} {'per rank':>9} {'all-gather ms':>14} {'ring ms':>9} {'speedup':>8} "
          f"{'all-gather MiB':>15} {'ring MiB':>9}")
    for r in rows:
        if not r["match"]:
            print(f"{r['seq']:>8} {r['seq_per_rank']:>9}  outputs differ: {r['error']}")
            continue
        mib = [f"{b / 2**20:.0f}" if b is not None else "-" for b in
               (r["allgather_call_peak_bytes"], r["ring_call_peak_bytes"])]
        print(f"{r['seq']:>8} {r['seq_per_rank']:>9} {r['allgather_ms']:>14.3f} {r['ring_ms']:>9.3f} "
              f"{r['speedup']:>7.2f}x {mib[0]:>15} {mib[1]:>9}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq-per-rank", type=int, nargs="+", default=[2048, 8192, 32768], help="sequence lengths per rank to sweep")
    parser.add_argument("--batch", type=int, default=1, help="sequences per batch")
    parser.add_argument("--heads", type=int, default=32, help="attention heads")
    parser.add_argument("--head-dim", type=int, default=128, help="size of each head")
    parser.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default="bf16", help="precision of q, k and v")
    parser.add_argument("--iterations", type=int, default=10, help="timed calls per length")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls first")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto", help="auto (CUDA with NCCL when present), cpu (gloo) or cuda")
    parser.add_argument("--json", type=Path, help="also write the rows here (rank 0)")
    args = parser.parse_args(argv)
    device = script_init(args.device)
    rows = [measure(s, args, device) for s in args.seq_per_rank]
    if dist.get_rank() == 0:
        print(f"context parallelism over {dist.get_world_size()} ranks ({dist.get_backend()}), "
              f"batch {args.batch}, {args.heads} heads of {args.head_dim}, {args.dtype}; "
              "times: slowest rank, median; memory: what one call adds, worst rank")
        _print(rows)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=2) + "\n")
    dist.barrier()
    dist.destroy_process_group()
    return 0 if all(r["match"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
