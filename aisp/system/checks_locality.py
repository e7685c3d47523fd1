"""Audit checks of each GPU's host side: its NUMA locality against this process's binding, and
where its interrupts are handled."""

from __future__ import annotations

from aisp.system.model import AuditContext, Finding, Grade
from aisp.system.numa import gpu_locality
from aisp.system.procfs import format_cpulist, numa_nodes, parse_cpulist, read, status_field, under


def locality(ctx: AuditContext, i: int) -> Finding:
    loc = gpu_locality(i, ctx.nvml, ctx.root)
    nodes = numa_nodes(ctx.root)
    node = "unknown" if loc.node is None else str(loc.node)
    observed = f"{loc.bus_id}: node {node}, local CPUs {format_cpulist(loc.cpus) or 'unknown'}"
    allowed = set(parse_cpulist(status_field(ctx.root, "Cpus_allowed_list") or ""))
    rec = "processes using this GPU run on its local CPUs"
    if len(nodes) <= 1:
        return Finding(Grade.PASS, observed, rec, loc.source, note="one NUMA node")
    if not loc.cpus:
        return Finding(Grade.UNKNOWN, observed, rec, loc.source, note="the platform reports no locality")
    if allowed <= set(loc.cpus):
        return Finding(Grade.PASS, observed, rec, loc.source)
    remote = format_cpulist(allowed - set(loc.cpus))
    return Finding(Grade.WARN, observed + f"; this process may also run on {remote}", rec, loc.source,
                   fix=f"numactl --cpunodebind={node} --membind={node} <cmd>  (python ch03/bind_numa_affinity.py)",
                   note="the audit inherits its launcher's binding: a job started the same way gets it too")


def _irq_cpus(ctx: AuditContext, irq: str) -> list[int]:
    text = read(ctx.root, f"/proc/irq/{irq}/effective_affinity_list") or read(
        ctx.root, f"/proc/irq/{irq}/smp_affinity_list") or ""
    return parse_cpulist(text)


def irq_affinity(ctx: AuditContext, i: int) -> Finding:
    loc = gpu_locality(i, ctx.nvml, ctx.root)
    msi = under(ctx.root, f"/sys/bus/pci/devices/{loc.bus_id}/msi_irqs")
    source = f"/sys/bus/pci/devices/{loc.bus_id}/msi_irqs, /proc/irq/N/effective_affinity_list"
    rec = "on the GPU's local CPUs"
    irqs = sorted((p.name for p in msi.iterdir()), key=int) if msi.is_dir() else []
    if not irqs:
        return Finding(Grade.SKIP, "no MSI interrupts listed", rec, source)
    if len(numa_nodes(ctx.root)) <= 1:
        return Finding(Grade.PASS, f"{len(irqs)} IRQs", rec, source, note="one NUMA node")
    if not loc.cpus:
        return Finding(Grade.UNKNOWN, f"{len(irqs)} IRQs", rec, source, note="GPU locality unknown")
    off = [irq for irq in irqs if not set(_irq_cpus(ctx, irq)) <= set(loc.cpus)]
    observed = f"{len(irqs)} IRQs, {len(off)} handled off the GPU's node"
    if not off:
        return Finding(Grade.PASS, observed, rec, source)
    return Finding(Grade.WARN, observed + f" ({','.join(off[:8])})", rec, source, needs_root=True,
                   fix=f"echo {format_cpulist(loc.cpus)} > /proc/irq/N/smp_affinity_list "
                       "(and ban those IRQs or CPUs in irqbalance, or it moves them back)")


CHECKS = (("numa", locality), ("irq", irq_affinity))
