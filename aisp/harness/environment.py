"""The environment fingerprint of a run, and the hardware key that names expectation files."""

from __future__ import annotations

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

FINGERPRINT_FIELDS = ("gpu_name", "gpu_count", "driver", "cuda", "torch")
"""What must match for two runs (or a run and its expectations) to be compared."""


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
    pynvml.nvmlShutdown()
    return state


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
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"git_commit": commit, "git_dirty": bool(status) if status is not None else None}


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
    """The full fingerprint: GPU, NVML state, CPU, versions, git state, command line and config."""
    return {"hardware_key": hardware_key(), **_gpu(), **_cpu(), **_versions(), **_git(root),
            "hostname": platform.node(), "command_line": sys.argv, "config": config or {}}


def fingerprint(env: dict[str, Any]) -> dict[str, Any]:
    """The part of a manifest that must match for results to be comparable."""
    return {key: env.get(key) for key in FINGERPRINT_FIELDS}


def fingerprint_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Human-readable differences between two fingerprints ("torch: 2.10 -> 2.11")."""
    return [f"{k}: {old.get(k)} -> {new.get(k)}" for k in FINGERPRINT_FIELDS
            if k in old and old.get(k) != new.get(k)]


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
