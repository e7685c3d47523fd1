"""Audit checks of CPU placement and scheduling: NUMA layout and binding, balancing, governor,
C-states, isolated cores, irqbalance."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from aisp.system.model import AuditContext, Finding, Grade
from aisp.system.procfs import (
    format_cpulist,
    numa_nodes,
    parse_cpulist,
    process_names,
    read,
    status_field,
    under,
)

NODE_DIR = "/sys/devices/system/node"
CPU_DIR = "/sys/devices/system/cpu"
BIND_FIX = "numactl --cpunodebind=<node> --membind=<node> <cmd>  (or python ch03/bind_numa_affinity.py --gpu N -- <cmd>)"
DEEP_CSTATE_US = 10
"""C-states with an exit latency above this (microseconds) hurt latency-bound serving."""


def numa_layout(ctx: AuditContext) -> Finding:
    nodes = numa_nodes(ctx.root)
    if not nodes:
        return Finding(Grade.SKIP, "no NUMA information", "-", NODE_DIR, note="kernel without NUMA sysfs")
    observed = "; ".join(f"node{n}: CPUs {format_cpulist(cpus)}" for n, cpus in nodes.items())
    note = "one NUMA node: cross-socket placement cannot happen here" if len(nodes) == 1 else ""
    return Finding(Grade.PASS, observed, "inventory", f"{NODE_DIR}/node*/cpulist", note=note)


def process_binding(ctx: AuditContext) -> Finding:
    cpus_text = status_field(ctx.root, "Cpus_allowed_list")
    mems_text = status_field(ctx.root, "Mems_allowed_list")
    if cpus_text is None:
        return Finding(Grade.UNKNOWN, "no Cpus_allowed_list", "-", "/proc/self/status")
    nodes = numa_nodes(ctx.root)
    allowed = set(parse_cpulist(cpus_text))
    spanned = sorted(n for n, cpus in nodes.items() if allowed & set(cpus))
    observed = f"CPUs {cpus_text} (nodes {spanned}), memory nodes {mems_text}"
    rec = "one node: the node local to the process's GPU"
    source = "/proc/self/status Cpus_allowed_list, Mems_allowed_list"
    note = "the audit inherits its launcher's binding, so this is what a job started the same way gets"
    if len(nodes) <= 1:
        return Finding(Grade.PASS, observed, rec, source, note="one NUMA node")
    mems = parse_cpulist(mems_text or "")
    if len(spanned) == 1 and len(mems) == 1:
        return Finding(Grade.PASS, observed, rec, source, note=note)
    return Finding(Grade.WARN, observed, rec, source, fix=BIND_FIX, note=note)


def numa_balancing(ctx: AuditContext) -> Finding:
    path = "/proc/sys/kernel/numa_balancing"
    value = read(ctx.root, path)
    if value is None:
        return Finding(Grade.SKIP, "absent", "0", path, note="kernel built without NUMA balancing")
    fix = "sysctl -w kernel.numa_balancing=0"
    if value == "0":
        return Finding(Grade.PASS, value, "0", path)
    if len(numa_nodes(ctx.root)) <= 1:
        return Finding(Grade.PASS, value, "0", path, note="one NUMA node: balancing has nothing to move")
    return Finding(Grade.WARN, value, "0", path, fix=fix, needs_root=True,
                   note="the kernel migrates pages of explicitly bound jobs away from where they were placed")


def governor(ctx: AuditContext) -> Finding:
    files = sorted(under(ctx.root, CPU_DIR).glob("cpu[0-9]*/cpufreq/scaling_governor"))
    source = f"{CPU_DIR}/cpu*/cpufreq/scaling_governor"
    if not files:
        return Finding(Grade.SKIP, "no cpufreq", "performance", source,
                       note="no frequency scaling exposed (a VM, or no cpufreq driver)")
    counts = Counter(f.read_text().strip() for f in files)
    observed = ", ".join(f"{gov} on {n} CPUs" for gov, n in counts.most_common())
    if set(counts) == {"performance"}:
        return Finding(Grade.PASS, observed, "performance", source)
    return Finding(Grade.WARN, observed, "performance", source,
                   fix="cpupower frequency-set -g performance", needs_root=True,
                   note="slow ramp-up delays kernel launches and data loading")


def _cstates(root: Path) -> list[tuple[str, int, bool]]:
    """(name, exit latency in us, enabled) of cpu0's idle states."""
    states = []
    for state in sorted(under(root, f"{CPU_DIR}/cpu0/cpuidle").glob("state[0-9]*")):
        rel = f"{CPU_DIR}/cpu0/cpuidle/{state.name}"
        states.append((read(root, f"{rel}/name") or state.name, int(read(root, f"{rel}/latency") or 0),
                       read(root, f"{rel}/disable") != "1"))
    return states


def cstates(ctx: AuditContext) -> Finding:
    source = f"{CPU_DIR}/cpuidle/current_driver, cpu0/cpuidle/state*/{{name,latency,disable}}"
    driver = read(ctx.root, f"{CPU_DIR}/cpuidle/current_driver")
    rec = ctx.by_profile("any (throughput-bound)", f"no enabled state with exit latency > {DEEP_CSTATE_US} us")
    if driver in (None, "none"):
        return Finding(Grade.SKIP, f"idle driver {driver or 'absent'}", rec, source)
    if driver == "haltpoll":
        return Finding(Grade.SKIP, "haltpoll (guest)", rec, source, note="a VM: the host controls C-states")
    deep = [f"{name} ({lat} us)" for name, lat, enabled in _cstates(ctx.root) if enabled and lat > DEEP_CSTATE_US]
    observed = f"{driver}; deep states enabled: {', '.join(deep) or 'none'}"
    if ctx.profile == "training" or not deep:
        return Finding(Grade.PASS, observed, rec, source)
    return Finding(Grade.WARN, observed, rec, source, needs_root=True,
                   fix="tuned-adm profile latency-performance  (holds /dev/cpu_dma_latency; or limit C-states in BIOS)",
                   note="waking from a deep state adds its exit latency to a request")


def isolated_cores(ctx: AuditContext) -> Finding:
    isolated = read(ctx.root, f"{CPU_DIR}/isolated")
    nohz = read(ctx.root, f"{CPU_DIR}/nohz_full")
    source = f"{CPU_DIR}/isolated, {CPU_DIR}/nohz_full"
    observed = f"isolcpus '{isolated or ''}', nohz_full '{nohz or ''}'"
    rec = ctx.by_profile("not needed", "serving threads on isolated cores (isolcpus + nohz_full)")
    if isolated is None:
        return Finding(Grade.SKIP, "absent", rec, source)
    if ctx.profile == "training" or isolated:
        return Finding(Grade.PASS, observed, rec, source)
    return Finding(Grade.WARN, observed, rec, source, needs_root=True,
                   fix="kernel cmdline isolcpus=<cpus> nohz_full=<cpus> (manual, reboot) or Kubernetes static CPU manager",
                   note="optional: keeps the scheduler tick and other tasks off latency-critical cores")


def irqbalance(ctx: AuditContext) -> Finding:
    running = "irqbalance" in process_names(ctx.root)
    banned = ""
    for line in (read(ctx.root, "/etc/default/irqbalance") or "").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "IRQBALANCE_BANNED_CPULIST":
            banned = value.strip().strip('"')
    observed = f"{'running' if running else 'not running'}; banned CPUs '{banned}'"
    rec = ctx.by_profile("any", "not running, or serving cores banned")
    source = "/proc/*/comm, /etc/default/irqbalance"
    if ctx.profile == "training" or not running or banned:
        return Finding(Grade.PASS, observed, rec, source, note="only processes visible here are seen")
    return Finding(Grade.WARN, observed, rec, source, needs_root=True,
                   fix="set IRQBALANCE_BANNED_CPULIST=<serving cpus> in /etc/default/irqbalance, restart irqbalance",
                   note="irqbalance may move device interrupts onto serving cores")


CHECKS = (
    ("cpu.numa.layout", numa_layout),
    ("cpu.numa.binding", process_binding),
    ("cpu.numa.balancing", numa_balancing),
    ("cpu.governor", governor),
    ("cpu.cstates", cstates),
    ("cpu.isolated", isolated_cores),
    ("cpu.irqbalance", irqbalance),
)
