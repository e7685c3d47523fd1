"""The environment fingerprint of a run, and the hardware key that names expectation files."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

from aisp.harness.scheduler import Share, Topology

FINGERPRINT_FIELDS = ("gpu_name", "gpu_count", "driver", "cuda", "torch", "triton", "python", "cpu_model")
"""What must match for two runs (or a run and its expectations) to be compared: the GPU model and the
GPUs the pair uses, the software that times and compiles it, and the CPU that launches its work."""
MULTI_GPU_FIELDS = ("host_gpu_count", "nvlink")
"""Added for a pair of several GPUs: the host's GPU count and each GPU's active NVLinks (a 2-GPU pair
on a 4-GPU host ran 1.48x where a 2-GPU host gave 1.75x)."""
NVLINKS = 18
"""NVLinks per GPU NVML is asked about (NVML_NVLINK_MAX_LINKS on Hopper)."""
UNHASHED = (":(exclude)*expectations_*.json",)
"""Left out of the dirty-tree check and diff hash: the files ``--update-expectations`` itself writes."""


def hardware_key(gpu_name: str | None = None, gpu_count: int | None = None) -> str:
    """``h100``, ``h200``, ``b200``, ``2x_h200`` … from the GPU model and count; ``cpu`` without one."""
    if gpu_name is None:
        if not torch.cuda.is_available():
            return "cpu"
        gpu_name = torch.cuda.get_device_name(0)
        gpu_count = torch.cuda.device_count()
    match = re.search(r"\b([A-Z]{1,3}\d{2,4}[A-Z]{0,2})\b", gpu_name.replace("NVIDIA", "").replace("RTX ", "RTX"))
    model = match.group(1) if match else re.sub(r"[^a-z0-9]+", "_", gpu_name.lower()).strip("_")
    model = model.lower()
    count = gpu_count or 1
    return model if count == 1 else f"{count}x_{model}"


def _nvml_state() -> dict[str, Any]:
    """Clocks, power, temperature, persistence, ECC and MIG of GPU 0 through NVML; {} without it."""
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception:  # NVML missing or no driver: a CPU machine, or a container without it
        return {}
    state: dict[str, Any] = {"driver": pynvml.nvmlSystemGetDriverVersion()}
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    queries = {
        "sm_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
        "mem_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
        "max_sm_clock_mhz": lambda: pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM),
        "power_limit_w": lambda: pynvml.nvmlDeviceGetPowerManagementLimit(handle) / 1000,
        "temperature_c": lambda: pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
        "persistence_mode": lambda: bool(pynvml.nvmlDeviceGetPersistenceMode(handle)),
        "ecc_mode": lambda: bool(pynvml.nvmlDeviceGetEccMode(handle)[0]),
        "mig_mode": lambda: bool(pynvml.nvmlDeviceGetMigMode(handle)[0]),
    }
    for key, query in queries.items():
        try:
            state[key] = query()
        except pynvml.NVMLError as exc:  # NotSupported / NoPermission: recorded, not guessed
            state[key] = f"unavailable: {exc}"
    state["nvlink"] = _nvlinks(pynvml)
    pynvml.nvmlShutdown()
    return state


def _nvlinks(pynvml: Any) -> list[int] | None:
    """Active NVLinks of each GPU of the host, in NVML order ([18, 18, 18, 18] on an HGX H200 board,
    [0, 0] without NVLink); None where NVML cannot say."""
    counts = []
    try:
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle, active = pynvml.nvmlDeviceGetHandleByIndex(index), 0
            for link in range(NVLINKS):
                try:
                    active += bool(pynvml.nvmlDeviceGetNvLinkState(handle, link))
                except pynvml.NVMLError:  # no such link on this GPU, or no NVLink at all
                    continue
            counts.append(active)
    except pynvml.NVMLError:
        return None
    return counts


def _gpu() -> dict[str, Any]:
    if not torch.cuda.is_available():
        return {"gpu_name": None, "gpu_count": 0}
    props = torch.cuda.get_device_properties(0)
    return {"gpu_name": props.name, "gpu_count": torch.cuda.device_count(),
            "compute_capability": f"{props.major}.{props.minor}", "gpu_memory_bytes": props.total_memory,
            "sm_count": props.multi_processor_count, "l2_bytes": getattr(props, "L2_cache_size", None),
            **_nvml_state()}


def _cpu() -> dict[str, Any]:
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.exists() else []
    model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")),
                 platform.processor())
    nodes = sorted(Path("/sys/devices/system/node").glob("node[0-9]*"))
    return {"cpu_model": model, "cpu_count": os.cpu_count(), "numa_nodes": len(nodes) or 1}


def _git(root: Path) -> dict[str, Any]:
    def git(*args: str) -> str | None:
        try:
            return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                                  timeout=10, check=True).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None
    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no", "--", ".", *UNHASHED)
    dirty = bool(status) if status is not None else None
    diff = git("diff", "HEAD", "--binary", "--", ".", *UNHASHED) if dirty else None
    return {"git_commit": commit, "git_dirty": dirty,
            "git_diff_sha256": hashlib.sha256(diff.encode()).hexdigest() if diff else None}


def _versions() -> dict[str, Any]:
    triton = importlib.import_module("triton") if importlib.util.find_spec("triton") else None
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "triton": getattr(triton, "__version__", None),
    }


def manifest(root: Path, config: dict[str, Any] | None = None) -> dict[str, Any]:
    """The full fingerprint: GPU, NVML state, CPU, versions, git state, command line and config. A run
    on the CPU (config ``device`` ``cpu``) has the ``cpu`` key and no GPU, as on a host without one:
    its figures are the CPU's, judged against the ``cpu`` expectations, not against the GPU's beside it."""
    on_cpu = (config or {}).get("device") == "cpu"
    gpu = {"gpu_name": None, "gpu_count": 0} if on_cpu else _gpu()
    return {"hardware_key": "cpu" if on_cpu else hardware_key(), **gpu, **_cpu(), **_versions(), **_git(root),
            "hostname": platform.node(), "command_line": sys.argv, "config": config or {}}


def fingerprint(env: dict[str, Any], gpus: int | None = None) -> dict[str, Any]:
    """The part of a manifest that must match for results to be comparable; given the GPUs a pair
    uses (``gpus``), ``gpu_count`` is theirs, and a pair of several adds the host's GPU count and
    NVLinks (:data:`MULTI_GPU_FIELDS`)."""
    found = {key: env.get(key) for key in FINGERPRINT_FIELDS}
    if gpus is None or not env.get("gpu_count"):
        return found
    found["gpu_count"] = gpus
    if gpus > 1:
        found.update(host_gpu_count=env.get("gpu_count"), nvlink=env.get("nvlink"))
    return found


def fingerprint_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Human-readable differences between two fingerprints ("torch: 2.10 -> 2.11"). A field the old
    one did not record (an entry stored before it was part of the fingerprint) is not compared,
    except the host's GPU count and NVLinks of a pair of several GPUs: they move its figures most
    (ch04:gradient_bucketing_multigpu read 1.65x on 2 GPUs of a 4-GPU host against 4.22x stored on
    a 2-GPU host without them, 2026-11-28), so such an entry is not compared ("not recorded")."""
    changes = [f"{k}: {old.get(k)} -> {new.get(k)}" for k in FINGERPRINT_FIELDS
               if k in old and old.get(k) != new.get(k)]
    for k in MULTI_GPU_FIELDS:
        if k in new and old.get(k, "not recorded") != new[k]:
            changes.append(f"{k}: {old.get(k, 'not recorded')} -> {new[k]}")
    return changes


def host_load() -> dict[str, Any]:
    """The host's load averages (1, 5, 15 min) beside its cores: a load above the cores is oversubscribed."""
    load = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    return {"loadavg": load, "cpu_count": os.cpu_count()}


def schedule(topo: Topology, shares: dict[int, Share], shard: str | None) -> dict[str, Any]:
    """How a run uses this host: its GPUs and each one's CPU share (threads, cores), NVLink pairs,
    its shard of a multi-machine run, and the load when it started."""
    return {"host": platform.node(), "shard": shard, "gpus": [g.visible for g in topo.gpus] or "one pair at a time",
            "cpu_count": topo.cpu_count, "shares": {g.visible: shares[g.ordinal].to_dict() for g in topo.gpus},
            "nvlink": sorted(sorted(p) for p in topo.nvlink), "load_at_start": host_load()}
