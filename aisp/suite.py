"""One call from the CLI (and the chapter wrappers) to a finished, reported run.

This is where the harness meets the tools: the roofline, the profiler and the expectations join
a run as hooks (:class:`aisp.harness.runner.Hooks`), so the harness imports none of them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from aisp.harness.artifacts import atomic_write_json, read_json
from aisp.harness.discovery import Pair, repo_root, resolve_targets
from aisp.harness.names import HOST_RATE_LINKS
from aisp.harness.options import RunOptions
from aisp.harness.results import EXIT_CODES, exit_code
from aisp.harness.resume import Part, options_for, read_manifest
from aisp.harness.runner import Again, Hooks, PairContext, Reporter, run_suite
from aisp.harness.scheduler import DEFAULT_SECONDS, Hint, Share, Topology, parse_shard, partition
from aisp.judge import expectations
from aisp.peak.measure import (
    RUN_HOST_PEAKS,
    load_peaks,
    measure_host,
    run_host_peaks,
    with_host,
    with_host_gpu,
)
from aisp.profile.pair import attach_profile
from aisp.report.ceilings import add_ceiling
from aisp.report.console import RichReporter
from aisp.report.roofline import add_roofline
from aisp.report.step_summary import CiOutputs
from aisp.report.tables import write_tables
from aisp.report.tidy import run_fields, write_tidy
from aisp.system import gpu_topology
from aisp.system.numa import nvml_index, torch_bus_id
from aisp.system.nvml import NvmlUnavailable, open_nvml

GPUS_IN_KEY = re.compile(r"^expectations_(\d+)x_")


def _roofline_step(host: dict[str, Any] | None = None) -> Any:
    """The roofline and ceiling of each result, from the cached peaks of the GPUs it used; with ``host``
    (--host-peaks: this host's figures, measured for the run), the host links priced at those, which
    the first result's step also writes into the run folder."""
    cache: dict[str, dict[str, Any] | None] = {}

    def step(result: dict[str, Any], ctx: PairContext) -> dict[str, Any]:
        key = expectations.gpu_key(result, ctx.manifest)  # the GPUs the pair uses: h200 on a 4 x H200 host
        if key not in cache:
            cache[key] = with_host(load_peaks(key), host)
        if host is not None and not (ctx.work_dir.parent / RUN_HOST_PEAKS).exists():
            atomic_write_json(ctx.work_dir.parent / RUN_HOST_PEAKS, host)
        return add_ceiling(add_roofline(result, cache[key]), cache[key])
    return step


def _judge_step(result: dict[str, Any], ctx: PairContext) -> dict[str, Any]:
    return expectations.judge(result, ctx.manifest)


def _confirm_step(runs: int) -> Any:
    """Re-run a pair its judge flags regressed ``runs`` times, at once, on the same GPUs; the re-runs
    go into the result (``reruns``) for the judge step to confirm or clear the flag."""
    def confirm(result: dict[str, Any], ctx: PairContext, again: Again) -> dict[str, Any]:
        if expectations.judge(result, ctx.manifest)["verdict"] != "regressed":
            return result
        return {**result, "reruns": [again(i) for i in range(runs)]}
    return confirm


def gpu_pids(share: Share, gpus: int) -> Iterable[int] | None:
    """The processes with a compute context on a worker's GPUs (those its share names, else the first
    ``gpus`` this process sees), through NVML; None where NVML or CUDA cannot say."""
    nvml, _ = open_nvml()
    if nvml is None:
        return None
    visible = [e.strip() for e in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if e.strip()]
    ordinals = [visible.index(g) if visible else int(g) for g in share.gpus] or list(range(gpus))
    try:
        indices = [nvml_index(o, nvml, os.environ, torch_bus_id(o)) for o in ordinals]
        calls = ("GetComputeRunningProcesses_v3", "GetComputeRunningProcesses")
        return [p.pid for i in indices for p in nvml.device(i, calls)]
    except (LookupError, ValueError, NvmlUnavailable, RuntimeError, AssertionError):
        return None


def _write_tables(run_dir: Path, results: list[dict[str, Any]]) -> None:
    """The run's Markdown and CSV summaries, and its tidy ``results.csv``."""
    write_tables(run_dir, results)
    write_tidy(run_dir, results, run_fields({}, read_json(run_dir / "manifest.json"), run_dir.name))


def pair_hints(pairs: list[Pair]) -> dict[str, Hint]:
    """Each pair's GPU count, expected seconds and link from the expectation files beside it: the count
    from the files whose key names one (``expectations_2x_h200.json``), the seconds an entry
    recorded (the longest of any file), and a host link where any file's entry names one of
    :data:`HOST_RATE_LINKS` (entries without a ``link`` mark nothing). The same files give the same
    hints on every machine."""
    files: dict[Path, list[tuple[int, dict[str, Any]]]] = {}
    hints = {}
    for pair in pairs:
        if pair.folder not in files:
            files[pair.folder] = [(int(m.group(1)) if (m := GPUS_IN_KEY.match(path.name)) else 1, _entries(path))
                                  for path in sorted(pair.folder.glob("expectations_*.json"))]
        found = [(gpus, entries[pair.name]) for gpus, entries in files[pair.folder] if pair.name in entries]
        seconds = [e["seconds"] for _, e in found if isinstance(e.get("seconds"), (int, float))]
        host_link = any(e.get("link") in HOST_RATE_LINKS for _, e in found)
        hints[pair.slug] = Hint(max((g for g, _ in found), default=1), max(seconds, default=DEFAULT_SECONDS), host_link)
    return hints


def _entries(path: Path) -> dict[str, Any]:
    """An expectation file's entries; {} when unreadable (judging names that file on its own)."""
    try:
        return expectations.load(path)["entries"]
    except (OSError, AttributeError, expectations.Unreadable):
        return {}


def shard_of(pairs: list[Pair], hints: dict[str, Hint], shard: str) -> list[Pair]:
    """This machine's pairs of ``--shard I/N``."""
    index, count = parse_shard(shard)
    mine = set(partition([p.slug for p in pairs], hints, count)[index])
    return [p for p in pairs if p.slug in mine]


def hooks_for(options: RunOptions, hints: dict[str, Hint] | None = None, host: dict[str, Any] | None = None) -> Hooks:
    """The tools a run with these options brings in: profiling, roofline, expectations with the
    re-runs that confirm a regression, NVML's view of other processes on a pair's GPUs; and, for
    ``--gpus``, the GPUs with their CPU shares and NVLink pairs (raises PlacementError for GPUs not here)."""
    post = []
    if options.profile != "none":
        post.append(partial(attach_profile, nsight=options.profile == "full"))
    post.append(_roofline_step(host))
    if not options.verify_only:
        post.append(_judge_step)
    on_timed = "aisp.profile.capture:capture_for_run" if options.profile != "none" else None
    topology = Topology() if options.gpus == "1" else gpu_topology.topology(options.gpus)
    confirm = _confirm_step(options.confirm_runs) if options.confirm_runs and not options.verify_only else None
    return Hooks(on_timed=on_timed, post=tuple(post), finish=_write_tables, topology=topology, hints=hints or {},
                 gpu_pids=gpu_pids, confirm=confirm)


def host_figures(options: RunOptions, resumed: Path | None) -> dict[str, Any] | None:
    """With --host-peaks, this host's figures: those the resumed run measured, else measured now, before
    any pair runs (the host otherwise idle): the CPU's (``measure_host``), then the launch and sync
    floors on the run's first GPU in a subprocess (``with_host_gpu``). Where those cannot be measured
    (no GPU, the subprocess failed) the run goes on at the cached floors, and one line says why."""
    if not options.host_peaks:
        return None
    if resumed is not None and (kept := run_host_peaks(resumed)):
        return kept
    on_cpu = options.device == "cpu"
    gpu = None if on_cpu else gpu_topology.first_gpu(options.gpus)
    host, note = with_host_gpu(measure_host(), gpu, "the run uses the CPU (--device cpu)" if on_cpu else "no CUDA GPU")
    if note:
        Console(stderr=True).print(f"[yellow]--host-peaks:[/yellow] {escape(note)}", soft_wrap=True)
    return host


def run(targets: list[str], roots: tuple[Path, ...], options: RunOptions,
        reporter: Reporter | None = None, ci: CiOutputs | None = None, part: Part | None = None) -> int:
    """Resolve targets, run them, write artifacts; returns the run's exit code.

    Raises TargetError for an unknown target, PlacementError for ``--gpus`` naming GPUs not here. A
    shard with no pair runs none (an empty run folder, exit 0). An expectations file that cannot be read is bad
    usage (exit 2 unless a worse verdict wins): every result is still written, the file is named
    on one line and left as it is. ``part``: the run folder a resumed run continues (:func:`resume`).
    """
    part = part or Part(tuple(targets), tuple(str(Path(r).resolve()) for r in roots))
    pairs = resolve_targets(targets, repo_root(), roots)
    hints = pair_hints(pairs)
    hooks = hooks_for(options, hints, host_figures(options, part.resume))
    if options.shard:
        pairs = shard_of(pairs, hints, options.shard)
    results, run_dir = run_suite(pairs, options, reporter or RichReporter(verb="verifying" if options.verify_only else "running"),
                                 hooks, part)
    if ci is not None:
        ci.write(results, run_dir.name, read_json(run_dir / "manifest.json")["hardware_key"])
    if options.update_expectations:
        print_stored(*store_results(results, read_json(run_dir / "manifest.json"), run_dir.name))
    unreadable = expectations.unreadable_files(results)
    for line in unreadable:
        Console(stderr=True).print(f"[red]error:[/red] expectations file unreadable, not compared nor updated: "
                                   f"{escape(line)}", soft_wrap=True)
    return max(exit_code(results), EXIT_CODES["usage"] if unreadable else 0)


def resume(run_dir: Path, targets: list[str], roots: tuple[Path, ...], given: dict[str, Any], force: bool = False,
           reporter: Reporter | None = None, ci: CiOutputs | None = None) -> int:
    """Continue the run in ``run_dir`` (``--resume``): its selection (the targets and roots given, else
    the run's) and options (the run's, with the free ones ``given`` on the command line), only its
    pairs without a final result; returns the exit code over every pair of the run. Raises
    ResumeError (bad input) before any pair runs where the run cannot be continued: :mod:`aisp.harness.resume`."""
    run_dir = run_dir.resolve()
    manifest = read_manifest(run_dir)
    options = options_for(manifest, given)
    selection = manifest["selection"]
    targets = targets or selection["targets"]
    roots = roots or tuple(Path(r) for r in selection["roots"])
    part = Part(tuple(targets), tuple(str(Path(r).resolve()) for r in roots), resume=run_dir, forced=force)
    return run(targets, roots, options, reporter, ci, part)


def store_run(run_dir: Path, roots: tuple[Path, ...] = ()) -> tuple[list[Path], list[str]]:
    """Store a finished run's results in the expectation files beside this checkout's pairs, as
    ``--update-expectations`` would have at the end of that run: for shards merged with ``aisp report
    merge``, or a run taken on another machine. Each result is matched to a pair here by its target
    (the run's file paths are the other machine's); the manifest gives the environment and the
    commit that ran. Returns (files written, warnings: pairs not here, results not stored).

    Raises FileNotFoundError for a folder without ``summary.json`` and ``manifest.json``."""
    summary, manifest = read_json(run_dir / "summary.json"), read_json(run_dir / "manifest.json")
    here = {p.target: p for p in resolve_targets([], repo_root(), roots)}
    results, warnings = [], []
    for result in summary["results"]:
        pair = here.get(result.get("target", ""))
        if pair is None:
            warnings.append(f"{result.get('target')}: no such pair in this checkout; not stored")
            continue
        results.append({**result, "files": [str(p) for p in (pair.baseline, *pair.optimized)]})
    written, refused = store_results(results, manifest, run_dir.name)
    return written, warnings + refused


def store_results(results: list[dict[str, Any]], manifest: dict[str, Any], run_id: str) -> tuple[list[Path], list[str]]:
    """Store a run's results (its manifest and folder name given) in the expectation files: the files
    written, and a line for each result not stored and why."""
    env = {**manifest, "run_id": run_id}
    written = expectations.update(results, env)
    return written, expectations.refused(results) + expectations.pending_runs(results, env)


def print_stored(written: list[Path], warnings: list[str]) -> None:
    """Say which expectation files were written (stdout) and what was not stored (stderr)."""
    for path in written:
        Console().print(f"Expectations updated: {path}")
    for line in warnings:
        Console(stderr=True).print(f"[yellow]warning:[/yellow] {escape(line)}", soft_wrap=True)
