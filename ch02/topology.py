"""The GPU-GPU and GPU-CPU matrix of this machine, as ``nvidia-smi topo -m`` prints it, read from
NVML: for each pair of GPUs the NVLinks between them (NV<n>, through NVSwitch or direct) or else
the PCIe path (PIX one switch, PXB several, PHB host bridge, NODE same NUMA node, SYS across
sockets); then each GPU's local CPUs and NUMA node; then what peer-to-peer access each pair
supports (``nvmlDeviceGetP2PStatus``: R read, W write, N over NVLink, A atomics).

Where data goes between two GPUs follows from this: NV<n> means a peer copy at up to n x 25 GB/s
per direction (NVLink 4); PIX/PXB a peer copy over PCIe; NODE/SYS a path through the host bridge,
and across sockets through the CPU interconnect. Pin a GPU's process to its local CPUs.

Without a GPU (or driver) it says so and exits 0. ``--replay FILE`` shows a recorded machine.
Run: python ch02/topology.py [--json] [--replay ch02/recorded/h200_hgx_8gpu.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass

from ch02_links import link_counts
from ch02_machine import P2P_CAPS, Machine, load_recorded, open_machine, text

from aisp.system.numa import gpu_locality
from aisp.system.nvml import NvmlUnavailable
from aisp.system.procfs import format_cpulist

PCIE_PATH = {0: "BRD", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
"""NVML_TOPOLOGY_* common-ancestor level -> nvidia-smi's label (BRD: two GPUs on one board)."""
P2P_LETTERS = (("read", "R"), ("write", "W"), ("nvlink", "N"), ("atomics", "A"))
LEGEND = """Legend:
  X    = self
  NV#  = connected by # NVLinks (direct, or each GPU's links into NVSwitch)
  PIX  = at most one PCIe switch between them      PXB = several PCIe switches
  PHB  = through a PCIe host bridge (the CPU)      NODE = host bridges within one NUMA node
  SYS  = across NUMA nodes (the CPU interconnect)  BRD = on one board
  P2P: R read, W write, N over NVLink, A atomics supported; - not; ? not reported"""


@dataclass(frozen=True)
class Topology:
    """What the matrix shows; ``links[a][b]`` and ``p2p[a][b]`` for GPUs a, b."""

    source: str
    names: list[str]
    links: list[list[str]]
    p2p: list[list[str]]
    cpus: list[str]
    numa: list[str]


def link_label(m: Machine, a: int, b: int, nvlinks: int) -> str:
    """The cell for GPUs a and b: X, NV<n>, or the PCIe path (? when NVML does not say)."""
    if a == b:
        return "X"
    if nvlinks:
        return f"NV{nvlinks}"
    try:
        return PCIE_PATH.get(m.nvml.topology(a, b), "?")
    except NvmlUnavailable:
        return "?"


def p2p_label(m: Machine, a: int, b: int) -> str:
    """Letters of the P2P capabilities NVML reports OK for a -> b ("RWNA", "RW-A", "X" for self)."""
    if a == b:
        return "X"
    letters = []
    for cap, letter in P2P_LETTERS:
        try:
            letters.append(letter if m.peers.p2p(a, b, P2P_CAPS[cap]) == 0 else "-")
        except NvmlUnavailable:
            letters.append("?")
    return "".join(letters)


def _locality(m: Machine, i: int) -> tuple[str, str]:
    try:
        loc = gpu_locality(i, m.nvml, m.sysfs_root)
    except NvmlUnavailable:
        return "N/A", "N/A"
    return format_cpulist(loc.cpus) or "N/A", "N/A" if loc.node is None else str(loc.node)


def topology(m: Machine) -> Topology:
    """The matrix of machine ``m`` (NVML's GPU numbering: PCI bus order)."""
    n = m.nvml.device_count()
    counts = link_counts(m)
    places = [_locality(m, i) for i in range(n)]
    return Topology(
        source=m.source, names=[text(m.nvml.device(i, "GetName")) for i in range(n)],
        links=[[link_label(m, a, b, counts[a][b]) for b in range(n)] for a in range(n)],
        p2p=[[p2p_label(m, a, b) for b in range(n)] for a in range(n)],
        cpus=[c for c, _ in places], numa=[node for _, node in places])


def render(t: Topology) -> str:
    """The matrices as aligned text, as nvidia-smi prints them, with the legend."""
    n = len(t.names)
    gpus = [f"GPU{i}" for i in range(n)]
    width = max(6, *(len(c) for row in t.links + t.p2p for c in row)) + 1
    cpu_width = max(len("CPU Affinity"), *(len(c) for c in t.cpus)) + 2
    head = " " * 7 + "".join(g.ljust(width) for g in gpus)
    lines = [f"GPU topology ({t.source}): {n} x {t.names[0]}" if len(set(t.names)) == 1 else
             f"GPU topology ({t.source}): {', '.join(t.names)}", "",
             head + "CPU Affinity".ljust(cpu_width) + "NUMA Affinity"]
    for i in range(n):
        lines.append(gpus[i].ljust(7) + "".join(c.ljust(width) for c in t.links[i]) + t.cpus[i].ljust(cpu_width) + t.numa[i])
    lines += ["", "Peer-to-peer (row -> column)", head.rstrip()]
    lines += [gpus[i].ljust(7) + "".join(c.ljust(width) for c in t.p2p[i]).rstrip() for i in range(n)]
    return "\n".join([*lines, "", LEGEND])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of the matrix")
    parser.add_argument("--replay", help="show a recorded machine (JSON) instead of this one")
    args = parser.parse_args(argv)
    machine, reason = (load_recorded(args.replay), "") if args.replay else open_machine()
    if machine is None:
        print(json.dumps({"gpus": 0, "reason": reason}) if args.json else f"No NVIDIA GPU here: {reason}.")
        return 0
    t = topology(machine)
    print(json.dumps(asdict(t), indent=2) if args.json else render(t))
    return 0


if __name__ == "__main__":
    sys.exit(main())
