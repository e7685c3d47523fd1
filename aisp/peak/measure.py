"""This machine's measured ceilings, cached per hardware key with their provenance.

``peaks/peak_<key>.json`` holds ``measurements`` (name -> value, unit, detail: rates and
bandwidths, the host's among them), ``latency`` (name -> value in µs, unit, detail: launch, dependent graph node,
sync, small copy, small all-reduce, op dispatch and dependent-FMA floors; absent from files written before it
existed, which still load),
``skipped`` (probe -> reason), ``errors`` (probe -> message) and ``provenance`` (date, GPU, driver,
versions, commit). Lookup order: ``$AISP_PEAK_DIR``, then the repository's ``peaks/`` folder.
"""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Collection
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

import torch

from aisp.harness.artifacts import atomic_write_json, read_json
from aisp.harness.discovery import repo_root
from aisp.harness.environment import fingerprint, fingerprint_changes, hardware_key, manifest
from aisp.peak import device_launch, fma_latency, graph_while, host, l2, latency, probes, simt
from aisp.peak.probes import FULL, QUICK, PeakConfig, ProbeSkipped

__all__ = ["FULL", "HOST_GPU_PROBES", "HOST_PROBES", "QUICK", "RUN_HOST_PEAKS", "HostGpuFailed", "PeakConfig",
           "environment_changes", "latency_figure", "load_peaks", "measure_host", "measure_host_gpu",
           "measure_peaks", "merge_peaks", "peak_dirs", "probe_names", "run_host_peaks", "save_peaks",
           "with_host", "with_host_gpu"]

PROVENANCE_FIELDS = ("hardware_key", "gpu_name", "gpu_count", "compute_capability", "gpu_memory_bytes",
                     "driver", "max_sm_clock_mhz", "power_limit_w", "cpu_model", "cpu_count",
                     "python", "torch", "cuda", "triton", "git_commit", "git_dirty")


def peak_dirs() -> list[Path]:
    """Where cached peaks are looked up, first match wins: $AISP_PEAK_DIR, then repo ``peaks/``."""
    dirs = [Path(os.environ["AISP_PEAK_DIR"])] if os.environ.get("AISP_PEAK_DIR") else []
    return [*dirs, repo_root() / "peaks"]


def peak_file(directory: Path, key: str) -> Path:
    return directory / f"peak_{key}.json"


def load_peaks(key: str) -> dict[str, Any] | None:
    """The cached peaks for hardware ``key`` (first found in :func:`peak_dirs`), or None."""
    for directory in peak_dirs():
        path = peak_file(directory, key)
        if path.exists():
            data = read_json(path)
            data["source"] = str(path)
            return data
    return None


OLD_LATENCY_NAMES = {"launch_eager": "launch_eager", "launch_graph_node": "launch_graph"}
"""Latency figures a file written before the ``latency`` section holds under ``measurements``, by
their old name: its ``launch_graph`` was a 1000-kernel graph's replay per kernel, a node's cost."""


def latency_figure(peaks: dict[str, Any], name: str) -> float | None:
    """The latency floor ``name`` in µs from a peaks document, or None where it was not measured;
    an older file's launch figures are read from ``measurements``."""
    found = (peaks.get("latency") or {}).get(name)
    if found is None and name in OLD_LATENCY_NAMES:
        found = peaks.get("measurements", {}).get(OLD_LATENCY_NAMES[name])
    return None if found is None else float(found["value"])


def save_peaks(peaks: dict[str, Any], directory: Path | None = None) -> Path:
    """Write ``peaks`` atomically to ``directory`` (default: the first of :func:`peak_dirs`)."""
    path = peak_file(directory or peak_dirs()[0], peaks["provenance"]["hardware_key"])
    atomic_write_json(path, {k: v for k, v in peaks.items() if k != "source"})
    return path


def environment_changes(peaks: dict[str, Any]) -> list[str]:
    """How this machine's GPU, driver, CUDA or torch differ from when ``peaks`` were measured."""
    return fingerprint_changes(peaks["provenance"], fingerprint(manifest(repo_root())))


Probe = tuple[str, str, Callable[[], Any]]
"""(section of the document, probe name, call returning one measurement or a dict of named ones)."""


def _probes(device: torch.device, cfg: PeakConfig) -> list[Probe]:
    """Every probe, in the order they run: rates (matmul, SIMT FMA) and bandwidths (HBM, L2, ...), then the
    latency floors."""
    listed: list[Probe] = []
    for dtype, reason in probes.matmul_dtypes(device).items():
        call = partial(probes.matmul, dtype, cfg, device)
        listed.append(("measurements", f"matmul_{dtype}", call if reason is None else partial(_skip, reason)))
    listed += [("measurements", name, partial(simt.fma_rate, name, cfg, device)) for name in simt.FMAS]
    calls, repeats = cfg.latency_calls, cfg.repeats
    listed += [("measurements", "memory_copy", partial(probes.memory_copy, cfg, device)),
               ("measurements", "l2_bandwidth", partial(l2.l2_bandwidth, cfg, device)),
               ("measurements", "transfers", partial(probes.transfers, cfg, device)),
               ("measurements", "host_memory", partial(host.memory, cfg)),
               ("measurements", "page_cache", partial(host.page_cache, cfg)),
               ("measurements", "first_touch", partial(host.first_touch, cfg)),
               ("measurements", "p2p_copy", partial(probes.peer_copy, cfg, device)),
               ("measurements", "nccl_allreduce", partial(probes.nccl_allreduce, cfg, device)),
               ("measurements", "compile", partial(probes.compile_time, cfg, device)),
               ("latency", "launch", partial(latency.launches, device, cfg.launch_kernels, repeats)),
               ("latency", "launch_dependent", partial(latency.dependent_nodes, device, cfg.launch_kernels, repeats)),
               ("latency", "sync", partial(latency.sync_roundtrip, device, calls, repeats)),
               ("latency", "small_copy", partial(latency.small_copies, device, calls, repeats)),
               ("latency", "allreduce_latency", partial(latency.allreduce, device, calls, repeats)),
               ("latency", "alltoall_latency", partial(latency.alltoall, device, calls, repeats)),
               ("latency", "dispatch", partial(latency.dispatch, calls, repeats)),
               ("latency", "device_launch", partial(device_launch.device_launches, device, calls, repeats)),
               ("latency", "graph_while", partial(graph_while.while_pass, device, calls, repeats)),
               ("latency", "fma_dependent", partial(fma_latency.fma_dependent, device, repeats))]
    return listed


def _skip(reason: str) -> None:
    raise ProbeSkipped(reason)


def _provenance(device: torch.device, cfg: PeakConfig) -> dict[str, Any]:
    env = manifest(repo_root())
    found = {k: env.get(k) for k in PROVENANCE_FIELDS}
    found["hardware_key"] = hardware_key() if device.type == "cuda" else "cpu"
    found["date"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    found["device"] = str(device)
    found["config"] = asdict(cfg)
    return found


def probe_names() -> list[str]:
    """Every probe's name, in the order they run (what ``only`` of :func:`measure_peaks` picks from)."""
    return [name for _, name, _ in _probes(torch.device("cpu"), FULL)]


def measure_peaks(cfg: PeakConfig = FULL, device: torch.device | None = None,
                  progress: Callable[[str], None] | None = None,
                  only: Collection[str] | None = None) -> dict[str, Any]:
    """Run every probe (or those named in ``only``) on ``device`` (default: GPU 0, else the CPU) and
    return the peaks document.

    A probe that does not apply is listed under ``skipped`` with its reason; one that fails is
    listed under ``errors`` with the exception, so a missing figure is always explained. An unknown
    name in ``only`` is a ValueError that names it.
    """
    if unknown := sorted(set(only or ()) - set(probe_names())):
        raise ValueError(f"unknown probe(s) {', '.join(unknown)}; the probes are {', '.join(probe_names())}")
    device = device or (torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu"))
    peaks: dict[str, Any] = {"measurements": {}, "latency": {}, "skipped": {}, "errors": {}}
    for section, name, call in _probes(device, cfg):
        if only is not None and name not in only:
            continue
        if progress:
            progress(name)
        try:
            found = call()
        except ProbeSkipped as skip:
            peaks["skipped"][name] = str(skip)
            continue
        except (RuntimeError, ValueError, TypeError, ImportError, AttributeError, OSError) as exc:
            peaks["errors"][name] = f"{type(exc).__name__}: {exc}"
            continue
        peaks[section].update(found if "value" not in found else {name: found})
        if device.type == "cuda":
            torch.cuda.empty_cache()
    peaks["provenance"] = _provenance(device, cfg)
    return peaks


REMEASURED_FIELDS = ("date", "cpu_model", "cpu_count", "gpu_name", "gpu_count", "torch", "git_commit")
"""What the provenance keeps of a partial measurement merged into a file: when, and on which host."""


def merge_peaks(cached: dict[str, Any], fresh: dict[str, Any], probes_run: Collection[str]) -> dict[str, Any]:
    """``cached`` with the figures of ``fresh``, a measurement of the probes ``probes_run`` only, put in:
    their new figures replace the old, their old skip or error lines give way to the new ones, and
    ``provenance["remeasured"]`` says, per probe, when and on which host (a host figure is that host's)."""
    merged = {k: v for k, v in cached.items() if k != "source"}
    for section in ("measurements", "latency"):
        merged[section] = {**cached.get(section, {}), **fresh[section]}
    for section in ("skipped", "errors"):
        kept = {k: v for k, v in cached.get(section, {}).items() if k not in probes_run}
        merged[section] = {**kept, **fresh[section]}
    when = {k: fresh["provenance"].get(k) for k in REMEASURED_FIELDS}
    remeasured = {**cached["provenance"].get("remeasured", {}), **{name: when for name in probes_run}}
    merged["provenance"] = {**cached["provenance"], "remeasured": remeasured}
    return merged


HOST_PROBES = ("host_memory", "page_cache", "first_touch", "dispatch")
"""The probes of the host's own rates (memory copy and fill, page-cache read, first-touch page faults)
and of its torch op dispatch from Python: the figures the host links (``host_memory``, ``page_cache``,
``page_faults``) and the ``dispatches`` latency count are priced at. The dispatch floor is the host's
too: ``dispatch_torch_op`` reads 3.45, 4.19 and 5.76 us in the cached 4 x, 2 x and 1 x H200 files,
three hosts, and ch01:preallocated_buffers (priced by its dispatches) read 83% of the cached floor
in one 2 x H200 book and 50% in the next with its code unchanged (2026-11-30)."""
RUN_HOST_PEAKS = "host_peaks.json"
"""The file in a run folder that holds the host figures measured for that run (``bench run --host-peaks``)."""


def measure_host(cfg: PeakConfig = FULL) -> dict[str, Any]:
    """This host's figures (:data:`HOST_PROBES`), measured now on the CPU; no GPU is touched."""
    return measure_peaks(cfg, torch.device("cpu"), only=HOST_PROBES)


HOST_GPU_PROBES = ("launch", "sync")
"""The probes of the host's side of the GPU: a kernel launch and a graph launch from Python (``launch``:
``launch_eager``, ``launch_graph``, ``launch_graph_node``) and an event record + host wait (``sync``:
``sync_roundtrip``), the floors of the ``launches``, ``graph_launches``, ``graph_nodes`` and ``syncs``
counts. They need a CUDA GPU, so they are apart from :data:`HOST_PROBES` (what the CPU measures) and
measured in a subprocess (:func:`measure_host_gpu`). Each is the host's: the CPU runs the launch path
and polls for the event, so the same GPU reads differently on another host. The cached files of three
H200 hosts read ``launch_eager`` 4.60, 5.84 and 5.84 us, ``launch_graph`` 2.75, 5.12 and 4.32 us and
``sync_roundtrip`` 7.88, 13.04 and 11.73 us (2 x, 4 x, 1 x H200), and ch01:cuda_graphs' eager baseline read
1.71 then 3.13 ms in two 2 x H200 books, code unchanged (2026-11-30). ``launch_graph_node`` (the
device's per-node cost: 0.526-0.541 us on the three) comes with ``launch`` and is replaced with it, the
same GPU model measured again."""
HOST_GPU_TIMEOUT_S = 120.0
"""Limit of :func:`measure_host_gpu`'s subprocess: Python, torch and CUDA start, then about a second of
launches and syncs (FULL: 11 windows of 1,000 each)."""


class HostGpuFailed(RuntimeError):
    """The subprocess of :func:`measure_host_gpu` failed, timed out or wrote no figures; the message says which."""


def measure_host_gpu(gpu: str, timeout_s: float = HOST_GPU_TIMEOUT_S) -> dict[str, Any]:
    """This host's launch and sync floors (:data:`HOST_GPU_PROBES`) measured now on GPU ``gpu`` (its
    ``CUDA_VISIBLE_DEVICES`` entry) by ``aisp peak --only launch,sync --out FILE`` in a subprocess: this
    process creates no CUDA context (a suite's workers fork from a zygote, and a context here would hold
    GPU memory and show as a process on the GPU). Returns that peaks document; raises
    :class:`HostGpuFailed` where the subprocess fails, runs past ``timeout_s`` or writes no readable file."""
    package_parent = Path(__file__).resolve().parents[2]
    with tempfile.TemporaryDirectory(prefix="aisp_host_gpu_") as folder:
        out = Path(folder) / "host_gpu.json"
        argv = [sys.executable, "-m", "aisp", "peak", "--only", ",".join(HOST_GPU_PROBES), "--out", str(out)]
        try:
            done = subprocess.run(argv, cwd=package_parent, env={**os.environ, "CUDA_VISIBLE_DEVICES": gpu},
                                  capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired as exc:
            raise HostGpuFailed(f"'aisp peak --only {','.join(HOST_GPU_PROBES)}' ran past {timeout_s:g} s") from exc
        if done.returncode != 0 or not out.exists():
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise HostGpuFailed(f"'aisp peak --only {','.join(HOST_GPU_PROBES)}' exited {done.returncode}: {last}")
        try:
            return read_json(out)
        except ValueError as exc:
            raise HostGpuFailed(str(exc)) from exc


def with_host_gpu(host: dict[str, Any], gpu: str | None, reason: str) -> tuple[dict[str, Any], str | None]:
    """``host`` (:func:`measure_host`'s figures) with the launch and sync floors measured on ``gpu``
    merged in (``provenance["remeasured"]`` then names their probes, which :func:`with_host` replaces),
    and None; where ``gpu`` is None (``reason`` says why) or the measurement fails, ``host`` with the
    reason under ``skipped`` or ``errors`` instead (the cached floors then price the run), and a line
    that says so. A probe that failed inside a successful subprocess is named by such a line too."""
    if gpu is None:
        host = {**host, "skipped": {**host["skipped"], **dict.fromkeys(HOST_GPU_PROBES, reason)}}
    else:
        try:
            host = merge_peaks(host, measure_host_gpu(gpu), HOST_GPU_PROBES)
        except HostGpuFailed as exc:
            host = {**host, "errors": {**host["errors"], **dict.fromkeys(HOST_GPU_PROBES, str(exc))}}
    lines = {**host.get("skipped", {}), **host.get("errors", {})}
    missing = {p: lines[p] for p in HOST_GPU_PROBES if p in lines}
    if not missing:
        return host, None
    why = "; ".join(dict.fromkeys(missing.values()))
    return host, f"{', '.join(missing)} not measured ({why}): the cached floors price them"


def _remeasured_gpu(host: dict[str, Any]) -> tuple[str, ...]:
    return tuple(p for p in HOST_GPU_PROBES if p in host.get("provenance", {}).get("remeasured", {}))


def run_host_peaks(run_dir: Path) -> dict[str, Any] | None:
    """The host figures a run measured for itself, or None where it measured none."""
    path = run_dir / RUN_HOST_PEAKS
    return read_json(path) if path.exists() else None


def with_host(peaks: dict[str, Any] | None, host: dict[str, Any] | None) -> dict[str, Any] | None:
    """``peaks`` (a machine's cached figures) with a run's own host figures in place of the cached
    host ones: a host link is priced at the host the run ran on, since the cached file may come from
    another host with the same GPUs (ch03:hugepages' first-touch rate moved its best from 97% to 71%
    of the cached figure between two 2 x H200 hosts). Replaced: the figures of :data:`HOST_PROBES`, and
    of those :data:`HOST_GPU_PROBES` the run measured (its ``provenance["remeasured"]`` names them); where
    it could not, the cached launch and sync floors stay and its line of why is left out. Unchanged
    where either is missing."""
    if not peaks or not host:
        return peaks
    replaced = (*HOST_PROBES, *_remeasured_gpu(host))
    lines = {s: {k: v for k, v in host.get(s, {}).items() if k in replaced} for s in ("skipped", "errors")}
    return merge_peaks(peaks, {**host, **lines}, replaced)
