"""Every GPU's hardware, the first thing to run on a new machine: SMs, clocks, memory and its peak
bandwidth, caches and per-SM limits, compute capability, PCIe link, NUMA node and local CPUs,
NVLinks. NVML (nvidia-ml-py) gives links, clocks and locality; PyTorch's CUDA properties give SMs,
caches and per-SM limits. A value the driver does not report prints "n/a", never a guess.

No GPU (or driver): it says so and exits 0. ``--replay FILE`` shows a recorded machine (``recorded/``
holds two written by hand from public specifications, not read from a machine; the tests use them).
Run: python ch02/hardware_info.py [--json] [--replay ch02/recorded/h200_hgx_8gpu.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ch02_links import nvlink_gbs, nvlinks, pcie_gbs
from ch02_machine import Machine, load_recorded, open_machine, text

from aisp.system.numa import gpu_locality
from aisp.system.nvml import NvmlUnavailable
from aisp.system.procfs import format_cpulist

CLOCK_SM, CLOCK_MEM = 1, 2


@dataclass(frozen=True)
class GpuInfo:
    """One GPU; None where neither NVML nor PyTorch reports the value."""

    index: int
    name: str
    bus_id: str
    compute_capability: str | None
    sms: int | None
    max_sm_clock_mhz: int | None
    max_mem_clock_mhz: int | None
    memory_gib: float | None
    memory_bus_bits: int | None
    memory_peak_gbs: float | None  # 2 transfers per clock (double data rate) x clock x bus width / 8
    l2_mib: float | None
    smem_per_sm_kib: float | None
    smem_per_block_optin_kib: float | None
    regs_per_sm: int | None
    max_threads_per_sm: int | None
    pcie: str | None
    pcie_gbs: float | None  # nominal per direction at the link's maximum generation and width
    numa_node: int | None
    local_cpus: str | None
    nvlinks: int
    nvlink_version: str | None
    nvlink_gbs: float | None  # nominal per direction over all active links


def _read(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except (NvmlUnavailable, KeyError, TypeError):
        return None


def _scaled(value: int | None, unit: int) -> float | None:
    return None if value is None else round(value / unit, 1)


def _pcie(m: Machine, i: int) -> tuple[str | None, float | None]:
    cur = _read(lambda: (m.nvml.device(i, "GetCurrPcieLinkGeneration"), m.nvml.device(i, "GetCurrPcieLinkWidth")))
    top = _read(lambda: (m.nvml.device(i, "GetMaxPcieLinkGeneration"), m.nvml.device(i, "GetMaxPcieLinkWidth")))
    if top is None:
        return None, None
    now = f"Gen{cur[0]} x{cur[1]} now, " if cur else ""
    return f"{now}Gen{top[0]} x{top[1]} max", round(pcie_gbs(*top), 1)


def gpu_info(m: Machine, i: int) -> GpuInfo:
    """What NVML and PyTorch report about GPU ``i`` (NVML's numbering: PCI bus order)."""
    props, dev = m.torch_props[i], lambda *a: m.nvml.device(i, *a)
    cc = _read(lambda: "{}.{}".format(*dev("GetCudaComputeCapability")))
    mem_clock, bus = _read(lambda: dev("GetMaxClockInfo", CLOCK_MEM)), _read(lambda: dev("GetMemoryBusWidth"))
    peak = round(2 * mem_clock * 1e6 * bus / 8 / 1e9) if mem_clock and bus else None
    loc = _read(lambda: gpu_locality(i, m.nvml, m.sysfs_root))
    links = nvlinks(m, i)
    pcie, pcie_rate = _pcie(m, i)
    return GpuInfo(
        index=i, name=_read(lambda: text(dev("GetName"))) or props.get("name", "?"), bus_id=m.nvml.bus_id(i),
        compute_capability=cc, sms=props.get("multi_processor_count"),
        max_sm_clock_mhz=_read(lambda: dev("GetMaxClockInfo", CLOCK_SM)), max_mem_clock_mhz=mem_clock,
        memory_gib=_scaled(_read(lambda: dev("GetMemoryInfo").total), 2**30), memory_bus_bits=bus,
        memory_peak_gbs=peak, l2_mib=_scaled(props.get("L2_cache_size"), 2**20),
        smem_per_sm_kib=_scaled(props.get("shared_memory_per_multiprocessor"), 2**10),
        smem_per_block_optin_kib=_scaled(props.get("shared_memory_per_block_optin"), 2**10),
        regs_per_sm=props.get("regs_per_multiprocessor"), max_threads_per_sm=props.get("max_threads_per_multi_processor"),
        pcie=pcie, pcie_gbs=pcie_rate, numa_node=loc.node if loc else None,
        local_cpus=format_cpulist(loc.cpus) if loc and loc.cpus else None, nvlinks=len(links),
        nvlink_version=links[0].version if links else None, nvlink_gbs=nvlink_gbs(links))


ROWS = (("compute capability", "compute_capability", ""), ("SMs", "sms", ""),
        ("max SM clock", "max_sm_clock_mhz", " MHz"), ("max memory clock", "max_mem_clock_mhz", " MHz"),
        ("memory", "memory_gib", " GiB"), ("memory bus", "memory_bus_bits", " bits"),
        ("memory peak", "memory_peak_gbs", " GB/s"), ("L2 cache", "l2_mib", " MiB"),
        ("shared memory / SM", "smem_per_sm_kib", " KiB"), ("shared memory / block (opt-in)", "smem_per_block_optin_kib", " KiB"),
        ("registers / SM", "regs_per_sm", ""), ("max threads / SM", "max_threads_per_sm", ""),
        ("PCIe", "pcie", ""), ("PCIe nominal / direction", "pcie_gbs", " GB/s"), ("NUMA node", "numa_node", ""),
        ("local CPUs", "local_cpus", ""), ("NVLinks active", "nvlinks", ""), ("NVLink version", "nvlink_version", ""),
        ("NVLink nominal / direction", "nvlink_gbs", " GB/s"))


def cell(value: Any, unit: str) -> str:
    """A value for the table: "n/a" when unknown, thousands separated."""
    return "n/a" if value is None else f"{value:,}{unit}" if isinstance(value, (int, float)) else f"{value}{unit}"


def table(infos: list[GpuInfo], title: str) -> Any:
    """A rich table: one row per property, one column per GPU."""
    from rich.table import Table
    out = Table(title=title)
    out.add_column("property")
    for g in infos:
        out.add_column(f"GPU {g.index}\n{g.name}\n{g.bus_id}", overflow="fold")
    for label, key, unit in ROWS:
        out.add_row(label, *(cell(getattr(g, key), unit) for g in infos))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--replay", type=Path, help="show a recorded machine (JSON) instead of this one")
    args = parser.parse_args(argv)
    machine, reason = (load_recorded(args.replay), "") if args.replay else open_machine()
    if machine is None:
        print(json.dumps({"gpus": [], "reason": reason}) if args.json else f"No NVIDIA GPU here: {reason}.")
        return 0
    infos = [gpu_info(machine, i) for i in range(machine.nvml.device_count())]
    if args.json:
        print(json.dumps({"source": machine.source, "gpus": [asdict(g) for g in infos]}, indent=2))
    else:
        from rich.console import Console
        Console(width=40 + 26 * len(infos), emoji=False, markup=False).print(table(infos, f"GPUs ({machine.source})"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
