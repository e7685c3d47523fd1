"""NVLink and PCIe links as NVML reports them (not a pair): each GPU's NVLinks, their version and
what is at the other end, the GPU-GPU link counts ``nvidia-smi topo -m`` prints as NV<n>, and the
nominal per-direction bandwidth of a link from its generation and width.
"""

from __future__ import annotations

from dataclasses import dataclass

from ch02_machine import Machine

from aisp.system.nvml import NvmlUnavailable

NVLINK_VERSION = {1: "1.0", 2: "2.0", 3: "2.2", 4: "3.0", 5: "3.1", 6: "4.0", 7: "5.0"}
"""``nvmlDeviceGetNvLinkVersion`` -> NVLink generation (NVML_NVLINK_VERSION_*)."""
NVLINK_GBS = {"2.0": 25.0, "2.2": 25.0, "3.0": 25.0, "3.1": 25.0, "4.0": 25.0, "5.0": 50.0}
"""Nominal GB/s per direction of one link: NVLink 4 (Hopper) 18 links x 25 = 450 GB/s, 900 both ways."""
PCIE_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
"""GT/s per lane per PCIe generation; Gen3+ encode 128b/130b (Gen1/2: 8b/10b)."""
TO_GPU, TO_SWITCH = 0, 2
"""``nvmlDeviceGetNvLinkRemoteDeviceType``: NVML_NVLINK_DEVICE_TYPE_GPU / _SWITCH."""
MAX_LINKS = 64


@dataclass(frozen=True)
class Link:
    """One active NVLink of a GPU: its generation and the far end (a GPU's bus id, or a switch)."""

    index: int
    version: str | None
    remote: str
    remote_bus: str | None


def _bus(value: object) -> str:
    bus = getattr(value, "busId", value)
    return (bus.decode() if isinstance(bus, bytes) else str(bus)).lower()[-12:]


def _remote(m: Machine, i: int, link: int) -> tuple[str, str | None]:
    try:
        kind = m.nvml.device(i, "GetNvLinkRemoteDeviceType", link)
    except NvmlUnavailable:
        kind = None
    if kind == TO_SWITCH:
        return "switch", None
    try:
        return "gpu", _bus(m.nvml.device(i, "GetNvLinkRemotePciInfo", link))
    except NvmlUnavailable:
        return "unknown", None


def nvlinks(m: Machine, i: int) -> list[Link]:
    """The active NVLinks of GPU ``i`` ([] when it has none or NVML does not report them)."""
    links = []
    for link in range(MAX_LINKS):
        try:
            if not m.nvml.device(i, "GetNvLinkState", link):
                continue
        except NvmlUnavailable:
            break
        try:
            version = NVLINK_VERSION.get(m.nvml.device(i, "GetNvLinkVersion", link))
        except NvmlUnavailable:
            version = None
        links.append(Link(link, version, *_remote(m, i, link)))
    return links


def nvlink_gbs(links: list[Link]) -> float | None:
    """Nominal GB/s per direction over all of a GPU's active links (None: unknown generation)."""
    rates = [NVLINK_GBS.get(link.version or "") for link in links]
    return None if not links or None in rates else sum(rates)


def pcie_gbs(gen: int, width: int) -> float:
    """Nominal GB/s per direction of a PCIe link (Gen5 x16: 63 GB/s; pinned copies reach ~55)."""
    efficiency = 128 / 130 if gen >= 3 else 0.8
    return PCIE_GTS.get(gen, 0.0) * efficiency * width / 8


def link_counts(m: Machine) -> list[list[int]]:
    """NVLinks between each pair of GPUs: direct links to that GPU, or through NVSwitch the links
    both have into the switch fabric (all-to-all, as ``nvidia-smi topo -m`` counts them)."""
    n = m.nvml.device_count()
    buses = [_bus(m.nvml.bus_id(i)) for i in range(n)]
    links = [nvlinks(m, i) for i in range(n)]
    switched = [sum(1 for lk in ls if lk.remote == "switch") for ls in links]
    counts = [[0] * n for _ in range(n)]
    for a in range(n):
        for b in range(n):
            if a != b:
                direct = sum(1 for lk in links[a] if lk.remote == "gpu" and lk.remote_bus == buses[b])
                counts[a][b] = direct + min(switched[a], switched[b])
    return counts
