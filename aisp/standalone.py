"""``python chNN/baseline_x.py``: run one variant on its own and print its timing."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

import torch

from aisp.harness.benchmark import Benchmark, unmet_requirements
from aisp.harness.options import DEVICES, RunOptions
from aisp.harness.stats import summarize
from aisp.harness.timing import gc_disabled, synchronize, time_call


def run_standalone(get_benchmark: Callable[[], Benchmark], argv: Sequence[str] | None = None) -> int:
    """Set up, warm up and time one variant; print average, median and std. Returns an exit code."""
    parser = argparse.ArgumentParser(description="Time one benchmark variant on its own.")
    parser.add_argument("--iterations", type=int, default=RunOptions.iterations, help="Timed iterations.")
    parser.add_argument("--warmup", type=int, default=RunOptions.warmup, help="Untimed iterations first.")
    parser.add_argument("--device", choices=DEVICES, default=RunOptions.device,
                        help="auto (CUDA when present), cpu or cuda.")
    parser.add_argument("--seed", type=int, default=RunOptions.seed, help="Seed of the inputs.")
    args, _ = parser.parse_known_args(argv)

    bench = get_benchmark()
    if args.device != "auto":
        bench.device = torch.device(args.device)
    name = type(bench).__name__
    title = (sys.modules[type(bench).__module__].__doc__ or name).strip().splitlines()[0]
    print(title)
    print("=" * 70)
    reason = unmet_requirements(bench.workload.requires, bench.device)
    if reason:
        print(f"SKIPPED: {reason}")
        return 0
    bench.seed = args.seed
    bench.setup()
    for _ in range(args.warmup):
        bench.run()
    synchronize(bench.device)
    with gc_disabled():
        times = [time_call(bench.run, bench.device).ms for _ in range(args.iterations)]
    s = summarize(times)
    print(f"Device: {bench.device}")
    print(f"Average time: {s.mean:.4f} ms")
    print(f"Median: {s.median:.4f} ms")
    print(f"Std: {s.std:.4f} ms")
    w = bench.workload
    seconds = s.median / 1e3
    if w.flops:
        print(f"Throughput: {w.flops / seconds / 1e12:.3f} TFLOP/s")
    if w.bytes:
        print(f"Bandwidth: {w.bytes / seconds / 1e9:.2f} GB/s")
    if w.items:
        print(f"Rate: {w.items / seconds:,.0f} {w.item_unit}/s")
    for key, value in bench.metrics().items():
        print(f"{key}: {value:.4g}")
    bench.teardown()
    return 0


def main(get_benchmark: Callable[[], Benchmark]) -> None:
    """Entry point for a pair file's ``if __name__ == "__main__"`` block."""
    sys.exit(run_standalone(get_benchmark))
