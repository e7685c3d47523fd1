"""The GPUs a ``--gpus`` run uses, as the scheduler needs them: ordinals, each GPU's NUMA cores
(chapter 3's locality code: NVML's CPU affinity, else sysfs) and which GPUs NVLink connects.

NVLink: NVML lists each GPU's active links and the PCI device at each link's far end; a GPU whose
far end is another GPU is linked to it directly, and GPUs whose links end on an NVSwitch are all
linked to one another through it. Where NVML cannot say, no pair is linked (groups are then any GPUs).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from aisp.harness.scheduler import Gpu, PlacementError, Topology, parse_gpus
from aisp.system.numa import nvml_index, resolve_gpu, torch_bus_id
from aisp.system.nvml import Nvml, NvmlUnavailable, open_nvml
from aisp.system.procfs import parse_cpulist, read

MAX_LINKS = 18
"""NVLinks per GPU on Hopper (NVML_NVLINK_MAX_LINKS)."""


def select(text: str, count: int) -> tuple[int, ...]:
    """The ordinals ``--gpus`` names among ``count`` visible GPUs. Raises PlacementError."""
    chosen = parse_gpus(text)
    if chosen == "all":
        chosen = count
    if isinstance(chosen, int):
        chosen = tuple(range(chosen))
    missing = [o for o in chosen if o >= count]
    if not count or missing:
        raise PlacementError(f"--gpus {text}: {count} CUDA GPU{'s' * (count != 1)} visible here")
    return chosen


def _visible(ordinal: int, env: Mapping[str, str]) -> str:
    """How a worker's CUDA_VISIBLE_DEVICES names this process's GPU ``ordinal``."""
    entries = [e.strip() for e in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if e.strip()]
    return entries[ordinal] if "CUDA_VISIBLE_DEVICES" in env else str(ordinal)


def first_gpu(text: str, env: Mapping[str, str] | None = None) -> str | None:
    """How a subprocess's CUDA_VISIBLE_DEVICES names the first GPU ``--gpus text`` uses (ordinal 0 of the
    default run's GPUs, else the first ordinal named); None where no CUDA GPU is visible. Asks the CUDA
    runtime for the count only, as :func:`topology` does: no context is created. Raises PlacementError."""
    import torch

    if not torch.cuda.is_available():
        return None
    return _visible(select(text, torch.cuda.device_count())[0], os.environ if env is None else env)


def by_core(cpus: tuple[int, ...], root: Path = Path("/")) -> tuple[int, ...]:
    """``cpus`` with each core's hyperthreads side by side (0, 64, 1, 65, ...), so that the scheduler's
    even slices of a node give each GPU whole cores, not the siblings of another GPU's cores."""
    def core(cpu: int) -> int:
        siblings = parse_cpulist(read(root, f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list") or "")
        return min(siblings, default=cpu)
    return tuple(sorted(cpus, key=lambda c: (core(c), c)))


def _far_ends(nvml: Nvml, index: int) -> list[str]:
    """PCI bus ids at the far end of each active NVLink of NVML device ``index``."""
    ends = []
    for link in range(MAX_LINKS):
        try:
            if not nvml.device(index, "GetNvLinkState", link):
                continue
            info = nvml.device(index, ("GetNvLinkRemotePciInfo_v2", "GetNvLinkRemotePciInfo"), link)
        except NvmlUnavailable:
            continue
        bus = info.busId
        ends.append((bus.decode() if isinstance(bus, bytes) else str(bus)).lower())
    return ends


def nvlink_pairs(nvml: Nvml, indices: Mapping[int, int]) -> frozenset[frozenset[int]]:
    """Ordinal pairs (``indices``: ordinal -> NVML index) that NVLink connects."""
    buses = {o: nvml.bus_id(i).lower() for o, i in indices.items()}
    ends = {o: _far_ends(nvml, i) for o, i in indices.items()}
    gpu_buses = set(buses.values())
    switched = {o for o, far in ends.items() if any(b not in gpu_buses for b in far)}
    pairs = set()
    for a in indices:
        for b in indices:
            if a < b and (buses[b] in ends[a] or buses[a] in ends[b] or {a, b} <= switched):
                pairs.add(frozenset((a, b)))
    return frozenset(pairs)


def topology(text: str, env: Mapping[str, str] | None = None) -> Topology:
    """The GPUs ``--gpus text`` names, with their NUMA cores and NVLink pairs. Raises PlacementError."""
    import torch

    env = os.environ if env is None else env
    ordinals = select(text, torch.cuda.device_count() if torch.cuda.is_available() else 0)
    nvml, _ = open_nvml()
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(range(os.cpu_count() or 1))
    gpus, indices = [], {}
    for ordinal in ordinals:
        try:
            loc = resolve_gpu(ordinal, nvml, env=env)
            cpus, node = by_core(tuple(c for c in loc.cpus if c in allowed)), loc.node
        except (LookupError, NvmlUnavailable, OSError, ValueError):
            cpus, node = (), None
        gpus.append(Gpu(ordinal, _visible(ordinal, env), cpus, node))
        if nvml is not None:
            try:
                indices[ordinal] = nvml_index(ordinal, nvml, env, torch_bus_id(ordinal))
            except (LookupError, NvmlUnavailable):
                pass
    linked = nvlink_pairs(nvml, indices) if nvml is not None and len(indices) == len(ordinals) else frozenset()
    return Topology(tuple(gpus), len(allowed), linked)
