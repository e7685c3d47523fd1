"""Record this machine for the tools' ``--replay``: every NVML answer ``hardware_info.py`` and
``topology.py`` read, with PyTorch's properties and P2P status, in the ``recorded/*.json`` format
(see ch02_machine.py). A recording replays to the same output on a machine without a GPU, so a
real machine can join the hand-written fixtures in the tests.
Run: python ch02/record_machine.py ch02/recorded/<name>.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ch02_machine import P2P_CAPS, PER_INDEX, Machine, open_machine
from hardware_info import gpu_info
from topology import topology

from aisp.system.nvml import Nvml
from aisp.system.procfs import format_cpulist, mask_words_to_ids


def plain(value: Any) -> Any:
    """An NVML answer as JSON: structures as dicts of their fields, bytes as text."""
    if isinstance(value, bytes):
        return value.decode()
    if hasattr(value, "_fields_"):
        return {name: plain(getattr(value, name)) for name, *_ in value._fields_}
    if isinstance(value, SimpleNamespace):  # a replayed structure
        return {k: plain(v) for k, v in vars(value).items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


class RecordingNvml:
    """Answers from ``inner``, remembering each one in the recorded format."""

    def __init__(self, inner: Nvml) -> None:
        self.inner = inner
        self.calls: list[dict[str, Any]] = [defaultdict(dict) for _ in range(inner.device_count())]
        self.levels: dict[tuple[int, int], int] = {}

    def device_count(self) -> int:
        return self.inner.device_count()

    def device(self, index: int, call: str, *args: Any) -> Any:
        value = self.inner.device(index, call, *args)
        if call in PER_INDEX:
            self.calls[index][call][args[0]] = plain(value)
        elif call == "GetCpuAffinity":
            self.calls[index][call] = format_cpulist(mask_words_to_ids(value))
        elif call == "GetMemoryAffinity":
            self.calls[index][call] = mask_words_to_ids(value)
        else:
            self.calls[index][call] = plain(value)
        return value

    def bus_id(self, index: int) -> str:
        bus = self.inner.bus_id(index)
        self.calls[index]["bus_id"] = bus
        return bus

    def topology(self, a: int, b: int) -> int:
        level = self.inner.topology(a, b)
        self.levels[(min(a, b), max(a, b))] = level
        return level

    def system(self, call: str) -> Any:
        return self.inner.system(call)


class RecordingPeers:
    def __init__(self, inner: Any, n: int) -> None:
        self.inner = inner
        self.status: dict[str, list[list[int | None]]] = {c: [[None] * n for _ in range(n)] for c in P2P_CAPS}

    def p2p(self, a: int, b: int, cap: int) -> int:
        value = self.inner.p2p(a, b, cap)
        self.status[next(k for k, v in P2P_CAPS.items() if v == cap)][a][b] = value
        return value


def _device_calls(calls: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for call, value in calls.items():
        if call == "GetNvLinkRemotePciInfo":
            value = {i: v["busId"] for i, v in value.items()}
        out[call] = [value.get(i) for i in range(max(value) + 1)] if call in PER_INDEX else value
    return out


def record(m: Machine, note: str) -> dict[str, Any]:
    """Run both tools on ``m`` through recorders; what they read, in the recorded format."""
    n = m.nvml.device_count()
    nvml, peers = RecordingNvml(m.nvml), RecordingPeers(m.peers, n)
    watched = replace(m, nvml=nvml, peers=peers)
    for i in range(n):
        gpu_info(watched, i)
    topology(watched)
    return {"_recorded": note,
            "devices": [{**_device_calls(nvml.calls[i]), "torch": m.torch_props[i]} for i in range(n)],
            "topology": [[0 if a == b else nvml.levels.get((min(a, b), max(a, b))) for b in range(n)]
                         for a in range(n)],
            "p2p": {cap: rows for cap, rows in peers.status.items() if any(v is not None for r in rows for v in r)}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the JSON file to write")
    args = parser.parse_args(argv)
    machine, reason = open_machine()
    if machine is None:
        print(f"No NVIDIA GPU here: {reason}. Nothing recorded.")
        return 0
    note = f"Recorded by ch02/record_machine.py from {machine.nvml.device_count()} GPU(s) through NVML."
    args.out.write_text(json.dumps(record(machine, note), indent=1))
    print(f"Recorded {machine.nvml.device_count()} GPU(s) to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
