"""What chapter 2's tools read about a machine (not a pair): NVML through ``aisp.system.nvml``, the
CUDA device properties PyTorch reports, and GPU pairs' peer-to-peer status; live or recorded.

A recorded machine is a JSON file (``recorded/*.json``) holding NVML's answers per call, so the
tools' parsing and formatting are tested without a GPU. Its format: ``common`` (calls every GPU
answers alike) merged under each of ``devices``; per-link and per-clock calls hold a list indexed
by the call's argument; ``GetCpuAffinity`` a cpulist ("0-55,112-167"); ``GetMemoryAffinity`` a
node list; ``topology`` the matrix of ``nvmlDeviceGetTopologyCommonAncestor`` levels; ``p2p`` per
capability a status for every pair or a matrix; ``torch`` CUDA device properties per GPU.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Protocol

from aisp.system.numa import nvml_index, torch_bus_id
from aisp.system.nvml import Nvml, NvmlUnavailable, StaticNvml, open_nvml
from aisp.system.procfs import parse_cpulist

P2P_CAPS = {"read": 0, "write": 1, "nvlink": 2, "atomics": 3, "pci": 4}
"""``nvmlGpuP2PCapsIndex_t`` values (pynvml spells READ as a tuple, so the numbers are here)."""
PER_INDEX = ("GetNvLinkState", "GetNvLinkVersion", "GetNvLinkRemoteDeviceType", "GetNvLinkRemotePciInfo",
             "GetMaxClockInfo", "GetClockInfo")  # the argument picks an entry (a link, a clock): a list
TORCH_PROPS = ("name", "major", "minor", "multi_processor_count", "total_memory", "L2_cache_size",
               "shared_memory_per_multiprocessor", "shared_memory_per_block_optin", "regs_per_multiprocessor",
               "max_threads_per_multi_processor", "warp_size")
NO_SYSFS = Path("/nonexistent-recorded-machine")  # a recorded machine's sysfs: none, nothing local leaks in


def text(value: Any) -> str:
    """An NVML string (older pynvml returns bytes)."""
    return value.decode() if isinstance(value, bytes) else str(value)


class Peers(Protocol):
    def p2p(self, a: int, b: int, cap: int) -> int:
        """``nvmlDeviceGetP2PStatus(a, b, cap)``: 0 is OK (NVML_P2P_STATUS_OK), else why not."""


@dataclass(frozen=True)
class Machine:
    """Everything the tools read: NVML, P2P status, PyTorch's properties per NVML index."""

    nvml: Nvml
    peers: Peers
    torch_props: list[dict[str, Any]]
    source: str
    sysfs_root: Path = field(default=Path("/"))


class LivePeers:
    """P2P status from the real NVML (the facade's device() passes one handle; this call takes two)."""

    def p2p(self, a: int, b: int, cap: int) -> int:
        import pynvml

        handle = pynvml.nvmlDeviceGetHandleByIndex
        try:
            return pynvml.nvmlDeviceGetP2PStatus(handle(a), handle(b), cap)
        except pynvml.NVMLError as err:
            raise NvmlUnavailable("error", f"nvmlDeviceGetP2PStatus: {err}") from err


def live_torch_props(nvml: Nvml) -> list[dict[str, Any]]:
    """PyTorch's CUDA properties of each NVML device, matched by PCI bus id, else through
    ``CUDA_VISIBLE_DEVICES`` (``aisp.system.numa.nvml_index``); {} where no CUDA device matches."""
    import torch

    props: list[dict[str, Any]] = [{} for _ in range(nvml.device_count())]
    for ordinal in range(torch.cuda.device_count() if torch.cuda.is_available() else 0):
        try:
            index = nvml_index(ordinal, nvml, os.environ, torch_bus_id(ordinal))
        except (LookupError, ValueError, IndexError):
            continue
        p = torch.cuda.get_device_properties(ordinal)
        props[index] = {k: getattr(p, k) for k in TORCH_PROPS if hasattr(p, k)}
    return props


def open_machine() -> tuple[Machine | None, str]:
    """This machine, or None and why there is nothing to show (no driver, no GPU)."""
    nvml, reason = open_nvml()
    if nvml is None or nvml.device_count() == 0:
        return None, reason or "NVML found no GPU"
    return Machine(nvml, LivePeers(), live_torch_props(nvml), "NVML on this machine"), ""


class RecordedPeers:
    """P2P status recorded per capability: one status for every pair, or a matrix (null: not read)."""

    def __init__(self, p2p: dict[str, Any]) -> None:
        self._p2p = p2p

    def p2p(self, a: int, b: int, cap: int) -> int:
        name = next(k for k, v in P2P_CAPS.items() if v == cap)
        value = self._p2p.get(name)
        value = value[a][b] if isinstance(value, list) else value
        if value is None:
            raise NvmlUnavailable("unsupported", f"no recorded P2P status for {name} {a}->{b}")
        return value


def _indexed(call: str, values: list[Any]) -> Any:
    def answer(i: int, *_: Any) -> Any:
        if i >= len(values):
            raise NvmlUnavailable("unsupported", f"{call}({i}): no such entry")
        return values[i]
    return answer


def _words(cpus: list[int]) -> list[int]:
    words = [0] * (max(cpus, default=0) // 64 + 1)
    for cpu in cpus:
        words[cpu // 64] |= 1 << cpu % 64
    return words


def _device(calls: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for call, value in calls.items():
        if call == "torch":
            continue
        if call == "GetCpuAffinity":
            value = _words(parse_cpulist(value))
        elif call == "GetMemoryAffinity":
            value = _words(value)
        elif call == "GetNvLinkRemotePciInfo":
            value = [SimpleNamespace(busId=v) for v in value]
        elif isinstance(value, dict):
            value = SimpleNamespace(**value)
        out[call] = _indexed(call, value) if call in PER_INDEX else value
    return out


def load_recorded(path: Path) -> Machine:
    """A machine from a recorded JSON file (see the module docstring for its format)."""
    data = json.loads(Path(path).read_text())
    devices = [_device({**data.get("common", {}), **d}) for d in data["devices"]]
    topo = data.get("topology", [])
    levels = {(a, b): topo[a][b] for a in range(len(topo)) for b in range(a + 1, len(topo))}
    torch_common = data.get("torch", {})
    props = [{**torch_common, **d.get("torch", {})} for d in data["devices"]]
    nvml = StaticNvml(devices, data.get("system", {}), levels)
    return Machine(nvml, RecordedPeers(data.get("p2p", {})), props, f"recorded: {Path(path).name}", NO_SYSFS)
