"""``aisp profile run``: profile every variant of one pair with torch.profiler, ncu, nsys, py-spy or the
CUDA caching allocator's history (memory)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from aisp.harness.artifacts import atomic_write_json, best_variant, new_run_dir, read_json, world_size
from aisp.harness.benchmark import Benchmark, default_device, unmet_requirements
from aisp.harness.discovery import Pair, TargetError, repo_root, resolve_targets
from aisp.harness.loader import load_benchmark
from aisp.harness.runner import PairContext
from aisp.harness.timing import synchronize
from aisp.profile.capture import SUMMARY_FILE, capture_torch
from aisp.profile.host import recording
from aisp.profile.memory import record_memory
from aisp.profile.ncu import launch_configs, run_ncu, top_launches
from aisp.profile.nsight import run_nsys
from aisp.profile.ranks import RANK_FIGURES
from aisp.profile.ranks import launch as launch_ranks
from aisp.profile.setup import set_up_here

Tool = Literal["torch", "ncu", "nsys", "py-spy", "memory"]


@dataclass(frozen=True)
class ProfileRequest:
    """What ``aisp profile run`` profiles and where it writes."""

    target: str
    """One pair, ``ch01:batch_size``."""
    tool: Tool = "torch"
    output_dir: Path | None = None
    """Where the files go; None: ``artifacts/<timestamp>/<chapter>_<name>/profiles``."""
    iterations: int = 3
    """Steady-state ``run()`` calls profiled per variant (torch, py-spy, memory)."""
    warmup: int = 3
    """Untraced ``run()`` calls after setup, before profiling."""
    kernels: int = 5
    """Top kernels ncu profiles and reports per variant."""
    timeout_s: float = 240.0
    """Seconds one ncu or nsys run of a variant may take."""


def profile_target(req: ProfileRequest) -> dict[str, Any]:
    """Profile the pair ``req.target`` names; write ``profile.json`` and return what it holds."""
    pair = _one_pair(req.target)
    out_dir = req.output_dir or new_run_dir(Path("artifacts")) / pair.slug / "profiles"
    out_dir.mkdir(parents=True, exist_ok=True)
    files = variant_files(pair)
    world, unmet = ranks_needed(files["baseline"])
    if world > 1:
        variants = _profile_ranks(req, files, out_dir, world, unmet)
    elif req.tool == "nsys":
        variants = {name: run_nsys(path, out_dir, req.timeout_s) for name, path in files.items()}
    elif req.tool == "py-spy":
        variants = _sample_host(req, files, out_dir)
    elif req.tool == "memory":
        variants = record_memory(files, out_dir, req.iterations, req.warmup)
    else:
        variants = _torch_then_ncu(req, files, out_dir)
    result = {"target": pair.target, "tool": req.tool, "output_dir": str(out_dir), "variants": variants}
    atomic_write_json(out_dir / f"profile_{req.tool}.json", result)
    return result


def variant_files(pair: Pair) -> dict[str, Path]:
    """``baseline``, ``optimized`` and ``optimized_<variant>`` mapped to their files."""
    files = {"baseline": pair.baseline}
    for path in pair.optimized:
        suffix = path.stem[len(f"optimized_{pair.name}"):]
        files[f"optimized{suffix}"] = path
    return files


def ranks_needed(baseline: Path) -> tuple[int, str | None]:
    """The ranks the pair runs as, and why it cannot run here (None: it can); no CUDA context made."""
    requires = load_benchmark(baseline).workload.requires
    return requires.world_size, unmet_requirements(requires, default_device(), capability=False)


def _profile_ranks(req: ProfileRequest, files: dict[str, Path], out_dir: Path, world: int,
                   unmet: str | None) -> dict[str, Any]:
    """A pair of several ranks: the torch profiler or the allocator's history on every rank
    (aisp.profile.ranks); ncu, nsys and py-spy would run it as a world of one rank, so each variant
    says it is skipped and why."""
    if unmet:
        return {name: {"skipped": unmet} for name in files}
    if req.tool not in RANK_FIGURES:
        why = (f"runs as {world} ranks; --tool {req.tool} would profile a world of one: "
               "use --tool torch or --tool memory (every rank)")
        return {name: {"skipped": why} for name in files}
    return launch_ranks(files, world, out_dir, req.iterations, req.warmup, req.timeout_s, tool=req.tool)


def _one_pair(target: str) -> Pair:
    pairs = resolve_targets([target], repo_root())
    if len(pairs) != 1:
        raise TargetError(f"'{target}' names {len(pairs)} pairs; profile one pair (e.g. ch01:batch_size)")
    return pairs[0]


def _torch_then_ncu(req: ProfileRequest, files: dict[str, Path], out_dir: Path) -> dict[str, Any]:
    """The torch capture; for ncu, then ncu on each variant's top kernels from its trace."""
    if req.tool == "ncu" and shutil.which("ncu") is None:
        return {name: run_ncu(path, out_dir) for name, path in files.items()}
    summaries = set_up_here(files, req.warmup, lambda benches: capture_torch(benches, out_dir, req.iterations))
    if req.tool == "torch" or any("skipped" in summary for summary in summaries.values()):
        return summaries
    results = {}
    for name in files:
        trace = Path(summaries[name]["files"]["trace"])
        launches = top_launches(trace, req.kernels)
        configs = launch_configs(trace, [launch.split(" <<<")[0] for launch in launches])
        results[name] = run_ncu(files[name], out_dir, req.kernels, req.timeout_s, launches, configs)
    return results


def _sample_host(req: ProfileRequest, files: dict[str, Path], out_dir: Path) -> dict[str, Any]:
    """py-spy on this process and its children during each set-up, warmed variant's ``req.iterations``
    ``run()`` calls (the host's time: Python, DataLoader workers, copies waited on)."""
    def sample(benches: dict[str, Benchmark]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for name, bench in benches.items():
            with recording(out_dir / name) as found[name]:
                for _ in range(req.iterations):
                    bench.run()
                synchronize(bench.device)
        return found
    return set_up_here(files, req.warmup, sample)


def attach_profile(result: dict[str, Any], ctx: PairContext, nsight: bool = False) -> dict[str, Any]:
    """A run's post step: add the torch capture's summary (written by ``capture_for_run`` in the
    worker) to the result; with ``nsight`` (``--profile full``) also run Nsight Compute on the best
    optimized variant's top kernels (from its torch trace) and Nsight Systems, each recording its
    skip reason where the tool is absent. Runs after timing, in its own processes, so it never
    touches the timed samples."""
    out_dir = ctx.work_dir / "profiles"
    summary = out_dir / SUMMARY_FILE
    if summary.exists():
        result = {**result, "profile": read_json(summary)}
    best = best_variant(result)
    if not nsight or best is None:
        return result
    if (world := world_size(result.get("workload") or {})) > 1:  # ncu/nsys would run it as a world of one rank
        why = {"skipped": f"runs as {world} ranks; Nsight runs one process (the torch capture covers every rank)"}
        return {**result, "profile": {**(result.get("profile") or {}), "nsight": {"ncu": why, "nsys": why}}}
    trace = ((result.get("profile") or {}).get("variants", {}).get(best["name"], {}).get("files", {}).get("trace"))
    launches = top_launches(Path(trace), 5) if trace and Path(trace).exists() else []
    configs = launch_configs(Path(trace), [launch.split(" <<<")[0] for launch in launches]) if launches else 0
    found = {"ncu": run_ncu(Path(best["file"]), out_dir, launches=launches, configs=configs),
             "nsys": run_nsys(Path(best["file"]), out_dir), "variant": best["name"]}
    return {**result, "profile": {**(result.get("profile") or {}), "nsight": found}}
