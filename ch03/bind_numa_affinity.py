"""Bind a process to its GPU's NUMA node, then (optionally) run a command there.

The GPU's local node and CPUs come from NVML (``nvmlDeviceGetCpuAffinity``/``GetMemoryAffinity``),
with sysfs (``/sys/bus/pci/devices/<bdf>/numa_node``, ``local_cpulist``) as fallback; the CUDA
ordinal is matched to its NVML device by PCI bus id. Binding sets the CPU affinity of every thread
and a memory policy (preferred node, or ``--strict`` for MPOL_BIND); both are inherited by the
command, its threads and its DataLoader workers. ``--diagnostics`` shows where threads last ran and
where resident memory lies, per node, before and after binding (or, for a command, while it runs),
so cross-socket placement is visible. On a one-node machine every line says node 0.

Run: python ch03/bind_numa_affinity.py --gpu 0 --diagnostics
     python ch03/bind_numa_affinity.py --gpu 0 -- python ch03/train.py --no-bind
     python ch03/bind_numa_affinity.py --gpu 0 --diagnostics -- python ch03/baseline_numa_unaware.py
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import torch

from aisp.system import numa


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    cmd = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[: argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", type=int, default=0, help="CUDA ordinal, as this process numbers GPUs")
    parser.add_argument("--strict", action="store_true", help="MPOL_BIND: fail rather than spill to another node")
    parser.add_argument("--diagnostics", action="store_true", help="show thread and memory placement per node")
    return parser.parse_args(own), cmd


def watch(cmd: list[str], node: int | None) -> int:
    """Run ``cmd`` as a child, sampling its placement twice a second; print the largest sample."""
    proc = subprocess.Popen(cmd)
    seen = None
    while proc.poll() is None:
        try:
            now = numa.placement(pid=str(proc.pid))
        except OSError:
            break
        if seen is None or sum(now.memory_by_node.values()) >= sum(seen.memory_by_node.values()):
            seen = now
        time.sleep(0.5)
    proc.wait()
    if seen is not None:
        print(f"command placement (sample with the most resident memory):\n{numa.describe(seen, node)}")
    return proc.returncode


def main(argv: list[str]) -> int:
    args, cmd = parse(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    loc = numa.device_locality(device, args.gpu)
    binding = numa.local_binding(loc, strict=args.strict)
    where = f"GPU {args.gpu} ({loc.bus_id})" if device == "cuda" else "CPU run"
    print(f"{where}: node {loc.node}, local CPUs {numa.format_cpulist(loc.cpus)} [{loc.source}]")
    print(f"binding: CPUs {numa.format_cpulist(binding.cpus)}, memory node {binding.node} "
          f"({'MPOL_BIND' if args.strict else 'MPOL_PREFERRED'}); NUMA nodes here: {len(numa.node_cpus()) or 1}")
    if args.diagnostics:
        print(f"before binding:\n{numa.describe(numa.placement(), loc.node)}")
    numa.bind_process(binding)
    if cmd and not args.diagnostics:
        os.execvp(cmd[0], cmd)
    if cmd:
        return watch(cmd, loc.node)
    if args.diagnostics:
        held = torch.ones(64 << 20)  # 256 MiB first-touched under the new policy
        print(f"after binding (256 MiB just allocated):\n{numa.describe(numa.placement(), loc.node)}")
        del held
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
