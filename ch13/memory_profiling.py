"""Allocator statistics, fragmentation and memory snapshots for the memory_profiling pair.

Each variant of the pair (baseline: summed-loss gradient accumulation; optimized: backward per
micro-batch) runs under each allocator setting (default; recommended: expandable segments) in
a fresh process, because allocator options are fixed when CUDA starts. Each process applies
its settings through ``custom_allocator.apply`` and verifies them, sets the benchmark up, runs
it ``--runs`` times and reads ``torch.cuda.memory_stats()``:

- peak allocated (live tensors) and peak reserved (what the caching allocator holds from CUDA);
- fragmentation = 1 - peak allocated / peak reserved: reserved memory that live tensors could
  not use at the peak (cached blocks of the wrong sizes, split remainders);
- inactive split bytes (free pieces of split blocks), cudaMalloc calls, allocation retries
  (a retry means the allocator had to free its cache and try again: fragmentation pressure).

The four results are compared with the pair's tolerance, so a setting that changed the
answer would show. With ``--dump`` each process also writes ``memory_summary()`` and a memory
snapshot (``<variant>_<setting>.pickle``: drag it onto https://pytorch.org/memory_viz).

Run: python ch13/memory_profiling.py --dump --out artifacts/ch13_memory
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch
from baseline_memory_profiling import WORKLOAD
from custom_allocator import AllocatorConfig, apply, verify

from aisp.harness.verify import VerificationError, compare, detach_copy

SETTINGS = {"default": AllocatorConfig(), "expandable": AllocatorConfig(expandable_segments=True)}
VARIANTS = {"baseline": "baseline_memory_profiling", "optimized": "optimized_memory_profiling"}
STATS = {
    "peak_allocated": "allocated_bytes.all.peak",
    "peak_reserved": "reserved_bytes.all.peak",
    "inactive_split_peak": "inactive_split_bytes.all.peak",
    "alloc_retries": "num_alloc_retries",
    "cuda_mallocs": "num_device_alloc",
    "segments_peak": "segment.all.peak",
}


def summarize(stats: dict[str, Any]) -> dict[str, float]:
    """The figures this tool reports, from a ``memory_stats()`` dict."""
    out = {name: float(stats.get(key, float("nan"))) for name, key in STATS.items()}
    reserved = out["peak_reserved"]
    out["fragmentation"] = 1.0 - out["peak_allocated"] / reserved if reserved > 0 else 0.0
    return out


def child(variant: str, setting: str, runs: int, out: Path, dump: bool) -> int:
    """One measurement in this (fresh) process."""
    cfg = SETTINGS[setting]
    apply(cfg)
    check = verify(cfg)
    if not check.ok:
        print(f"allocator settings not in effect: {check.problems}", file=sys.stderr)
        return 1
    bench = __import__(VARIANTS[variant]).get_benchmark()
    bench.device, bench.seed = torch.device("cuda"), 0
    bench.setup()
    torch.cuda.reset_peak_memory_stats()
    if dump:
        torch.cuda.memory._record_memory_history(max_entries=200_000)
    for _ in range(runs):
        result = bench.run()
    torch.cuda.synchronize()
    stem = out / f"{variant}_{setting}"
    if dump:
        torch.cuda.memory._dump_snapshot(str(stem) + ".pickle")
        torch.cuda.memory._record_memory_history(enabled=None)
        Path(str(stem) + "_summary.txt").write_text(torch.cuda.memory_summary())
    torch.save(result, str(stem) + ".pt")
    record = {"variant": variant, "setting": setting, "conf": cfg.conf(), "confirmed": check.confirmed,
              **summarize(torch.cuda.memory_stats())}
    Path(str(stem) + ".json").write_text(json.dumps(record, indent=2))
    return 0


def compare_results(out: Path, names: list[str]) -> list[str]:
    """Each run's saved result against the first one's, with the pair's tolerance."""
    ref = detach_copy(torch.load(out / f"{names[0]}.pt"))
    notes = []
    for name in names[1:]:
        try:
            ev = compare(ref, detach_copy(torch.load(out / f"{name}.pt")), WORKLOAD)
            notes.append(f"{name} matches {names[0]} (max abs err {ev.max_abs_err:.2e})")
        except VerificationError as exc:
            notes.append(f"{name} DIFFERS from {names[0]}: {exc}")
    return notes


def table(records: list[dict[str, Any]]) -> str:
    head = f"{'variant':<10} {'setting':<11} {'alloc MiB':>10} {'reserved MiB':>13} {'frag':>6} " \
           f"{'split MiB':>10} {'mallocs':>8} {'retries':>8}"
    rows = [head]
    for r in records:
        rows.append(f"{r['variant']:<10} {r['setting']:<11} {r['peak_allocated'] / 2**20:>10.0f} "
                    f"{r['peak_reserved'] / 2**20:>13.0f} {r['fragmentation']:>6.1%} "
                    f"{r['inactive_split_peak'] / 2**20:>10.0f} {r['cuda_mallocs']:>8.0f} "
                    f"{r['alloc_retries']:>8.0f}")
    return "\n".join(rows)


def parent(runs: int, out: Path, dump: bool) -> int:
    out.mkdir(parents=True, exist_ok=True)
    names, records = [], []
    for variant in VARIANTS:
        for setting in SETTINGS:
            cmd = [sys.executable, __file__, "--child", variant, "--setting", setting, "--runs", str(runs),
                   "--out", str(out)] + (["--dump"] if dump else [])
            if subprocess.run(cmd).returncode:
                print(f"{variant}/{setting} failed")
                return 1
            names.append(f"{variant}_{setting}")
            records.append(json.loads((out / f"{names[-1]}.json").read_text()))
    notes = compare_results(out, names)
    for name in names:
        (out / f"{name}.pt").unlink()
    (out / "memory_profiling.json").write_text(json.dumps({"records": records, "results": notes}, indent=2))
    print(table(records))
    print("\n".join(notes))
    return 1 if any("DIFFERS" in n for n in notes) else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dump", action="store_true", help="also write memory_summary() and a snapshot per run")
    p.add_argument("--runs", type=int, default=2, help="training steps profiled per variant")
    p.add_argument("--out", type=Path, default=Path("artifacts/ch13_memory"), help="folder for the summaries and snapshots")
    p.add_argument("--child", choices=list(VARIANTS), help=argparse.SUPPRESS)
    p.add_argument("--setting", choices=list(SETTINGS), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("SKIPPED: needs a CUDA GPU (allocator statistics are CUDA's)")
        return 0
    if a.child:
        return child(a.child, a.setting, a.runs, a.out, a.dump)
    return parent(a.runs, a.out, a.dump)


if __name__ == "__main__":
    sys.exit(main())
