"""Verify one pair on many random seeds in one process (or one torchrun world): issue 27's "pass 20
random seeds in a row" without a process start and a process-group setup per seed.

Each seed is drawn at random (printed, so a failure can be repeated with ``--seeds-from``) and
goes through the harness's own verification (``verify_seed``: every variant built at that seed,
run once, compared with the baseline by the pair's tolerance); on several ranks the verdicts are
exchanged after each seed exactly as in a pair run.

    python tests/seed_sweep.py -t ch13:precisionfp8 --count 20
    torchrun --standalone --nproc-per-node 2 tests/seed_sweep.py -t ch13:context_parallel_multigpu

Prints one line per seed and a JSON summary (``--out`` writes it too); exit 0 when every seed
passed on every rank, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path

import torch.distributed as dist

from aisp.harness.benchmark import unmet_requirements
from aisp.harness.discovery import repo_root, resolve_targets
from aisp.harness.distributed import agree, init, rank_from_env
from aisp.harness.execute import pick_device, start, teardown, verify_seed
from aisp.harness.loader import load_benchmark
from aisp.harness.options import RunOptions


def seeds_for(count: int, first: int | None) -> list[int]:
    """``count`` seeds: drawn from the OS's randomness, or ``first``, ``first + 1``, ..."""
    if first is not None:
        return [first + i for i in range(count)]
    rng = random.SystemRandom()
    return [rng.randrange(1, 2**31) for _ in range(count)]


def sweep(target: str, seeds: list[int], device: str = "auto", roots: tuple[Path, ...] = ()) -> dict:
    """Verify ``target``'s variants at each seed; one record per seed with each variant's verdict."""
    pair = resolve_targets([target], repo_root(), roots)[0]
    sys.path.insert(0, str(pair.folder))  # chapter-local helpers, as the worker's PYTHONPATH has
    paths = [pair.baseline, *pair.optimized]
    ranked = "LOCAL_RANK" in os.environ
    workload, dev = load_benchmark(paths[0]).workload, pick_device(device)
    skip = unmet_requirements(workload.requires, dev)
    if skip:
        return {"target": target, "seeds": 0, "passed": False, "skipped": skip, "records": []}
    if ranked:  # one process group for every seed; rank 0's seeds go to all
        dev = init(rank_from_env(), dev, workload.timeout_s)
        box = [seeds]
        dist.broadcast_object_list(box, src=0)
        seeds = box[0]
    records = []
    for seed in seeds:
        _, variants, _, workload = start(paths, RunOptions(device=device))
        verify_seed(variants, workload, dev, seed, keep=False)
        if ranked:
            agree(variants)
        teardown(variants)
        outcome = {v.name: ("ok" if v.verdict == "pending" else f"{v.verdict}: {v.reason}")
                   for v in variants[1:]}
        errors = {v.name: v.evidence.to_dict().get("rel_l2_err") for v in variants[1:]}
        records.append({"seed": seed, "outcome": outcome, "rel_l2_err": errors})
        if int(os.environ.get("RANK", "0")) == 0:
            print(f"seed {seed}: " + "; ".join(f"{k} {v[:160]}" for k, v in outcome.items()), flush=True)
    if ranked:
        dist.destroy_process_group()
    passed = all(o == "ok" for r in records for o in r["outcome"].values())
    return {"target": target, "seeds": len(records), "passed": passed, "records": records}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-t", "--target", required=True)
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--seeds-from", type=int, default=None, help="seeds N, N+1, ... instead of random ones")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--root", type=Path, action="append", default=[], help="a folder of your own pairs")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    summary = sweep(args.target, seeds_for(args.count, args.seeds_from), args.device,
                    tuple(r.resolve() for r in args.root))
    if int(os.environ.get("RANK", "0")) == 0:
        print(json.dumps({k: v for k, v in summary.items() if k != "records"}))
        if args.out:
            args.out.write_text(json.dumps(summary, indent=1))
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
