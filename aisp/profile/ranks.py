"""``aisp profile run --tool torch|memory`` on a pair that runs as several ranks (``Requirements(ranks=N)``).

Profiled in one process, such a pair would run as a world of one rank: no collectives, so the profile
of another program. Here torchrun starts one process per rank, and every rank runs the chosen tool in
step with the others (their collectives need every rank), writing its own files under ``rank<R>/``:

- ``torch``: every rank loads, sets up and warms each variant and profiles it; the parent keeps rank
  0's summary of each variant and adds every rank's window, GPU busy and kernel time (the slowest
  rank sets a step's time).
- ``memory``: every rank records the CUDA caching allocator's history over its own calls
  (:func:`aisp.profile.memory.record_memory`: each variant set up alone, in the same order on every
  rank, so their collectives line up); the parent keeps rank 0's summary of each variant and adds
  every rank's peak and the bytes live when its window began (a pipeline's stages hold different
  activations, so the ranks' peaks differ).

The parent runs :func:`launch`; each rank runs this module:
``python -m torch.distributed.run --standalone --nproc-per-node N -m aisp.profile.ranks TOOL OUT ITERATIONS WARMUP NAME=PATH...``
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import torch.distributed as dist

from aisp.harness.artifacts import atomic_write_json, read_json
from aisp.harness.benchmark import default_device
from aisp.harness.distributed import NVLS_OFF, init, rank_from_env
from aisp.profile.capture import capture_torch
from aisp.profile.memory import record_memory
from aisp.profile.nsight import failure, run_logged
from aisp.profile.setup import set_up_here

RANK_FILE = "rank_summaries.json"
GROUP_TIMEOUT_S = 600.0
"""How long a rank waits for the others at a collective before the process group gives up."""
RANK_FIGURES = {"torch": ("window_us", "kernel_us", "gpu_busy_fraction"), "memory": ("peak_bytes", "start_bytes")}
"""The tools that run on every rank, and the figures of each rank the parent keeps beside rank 0's summary."""


def launch(files: dict[str, Path], world: int, out_dir: Path, iterations: int, warmup: int,
           timeout_s: float, *, tool: str) -> dict[str, Any]:
    """Profile every variant in ``files`` on ``world`` ranks with ``tool`` (a key of :data:`RANK_FIGURES`);
    ``{variant: rank 0's summary + "ranks"}``, or, for all, the failure (why, the log and its tail)
    when the ranks fail or run past ``timeout_s``."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world}",
           "-m", "aisp.profile.ranks", tool, str(out_dir), str(iterations), str(warmup),
           *(f"{name}={path}" for name, path in files.items())]
    log = out_dir / "ranks.log"
    status = run_logged(cmd, log, timeout_s, {**os.environ, **NVLS_OFF})
    if status != 0:
        return {name: failure("torchrun", status, log, timeout_s) for name in files}
    return merge([read_json(out_dir / f"rank{rank}" / RANK_FILE)["variants"] for rank in range(world)], tool)


def merge(per_rank: list[dict[str, Any]], tool: str) -> dict[str, Any]:
    """Rank 0's summary of each variant, with ``ranks``: every rank's figures of ``tool``
    (:data:`RANK_FIGURES`: window, kernel µs and GPU busy for torch; peak and start bytes for memory)."""
    figures = RANK_FIGURES[tool]
    merged = {}
    for name, first in per_rank[0].items():
        if "skipped" in first or "error" in first:
            merged[name] = first
            continue
        merged[name] = {**first, "ranks": [{"rank": rank, **{key: found[name][key] for key in figures}}
                                           for rank, found in enumerate(per_rank)]}
    return merged


def main(argv: list[str] | None = None) -> int:
    """One rank: join the group, profile every variant in step with the other ranks, write its summaries."""
    args = sys.argv[1:] if argv is None else argv
    tool, out_dir, iterations, warmup = args[0], Path(args[1]), int(args[2]), int(args[3])
    files = {name: Path(path) for name, path in (arg.split("=", 1) for arg in args[4:])}
    rank = rank_from_env()
    init(rank, default_device(), GROUP_TIMEOUT_S)
    rank_dir = out_dir / f"rank{rank.rank}"
    rank_dir.mkdir(parents=True, exist_ok=True)
    try:
        if tool == "memory":
            found = record_memory(files, rank_dir, iterations, warmup)
        else:
            found = set_up_here(files, warmup, lambda benches: capture_torch(benches, rank_dir, iterations))
        atomic_write_json(rank_dir / RANK_FILE, {"variants": found})
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
