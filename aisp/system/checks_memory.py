"""Audit checks of host memory: transparent hugepages, swap, dirty writeback, locked memory, /dev/shm."""

from __future__ import annotations

import os
from pathlib import Path

from aisp.system.model import AuditContext, Finding, Grade
from aisp.system.procfs import Mount, active_choice, meminfo, mount_of, mounts, parse_size, read, under

THP = "/sys/kernel/mm/transparent_hugepage"
SWAPPINESS_MAX = 10
SHM_FAIL_BYTES = 1 << 30
"""Below this a typical loader fails: 8 workers x prefetch 2 x a 64 x 3 x 224 x 224 fp32 batch is 2.4 GB."""
SHM_WARN_BYTES = 4 << 30
DIRTY_TARGETS = {"training": (40, 10), "inference": (10, 3)}
"""(dirty_ratio, dirty_background_ratio) of tuned's accelerator-performance and latency-performance."""


def thp_enabled(ctx: AuditContext) -> Finding:
    path = f"{THP}/enabled"
    text = read(ctx.root, path)
    rec = ctx.by_profile("always", "madvise or never")
    if text is None:
        return Finding(Grade.SKIP, "absent", rec, path, note="kernel without THP")
    value = active_choice(text)
    good = ctx.by_profile({"always"}, {"madvise", "never"})
    fix = f"echo {ctx.by_profile('always', 'madvise')} > {path}"
    if value in good:
        return Finding(Grade.PASS, value, rec, path)
    note = ctx.by_profile("madvise: only regions that ask for huge pages get them" if value == "madvise"
                          else "4 KiB pages only: more page faults and TLB misses on large host buffers",
                          "always: khugepaged and compaction can stall a latency-bound request")
    return Finding(Grade.WARN, value, rec, path, fix=fix, needs_root=True, note=note)


def thp_defrag(ctx: AuditContext) -> Finding:
    path = f"{THP}/defrag"
    text = read(ctx.root, path)
    rec = "madvise, defer+madvise, defer or never (not always)"
    if text is None:
        return Finding(Grade.SKIP, "absent", rec, path, note="kernel without THP")
    value = active_choice(text)
    if value != "always":
        return Finding(Grade.PASS, value, rec, path)
    return Finding(Grade.WARN, value, rec, path, fix=f"echo madvise > {path}", needs_root=True,
                   note="always: every fault may stall in direct compaction")


def swap(ctx: AuditContext) -> Finding:
    lines = (read(ctx.root, "/proc/swaps") or "").splitlines()[1:]
    devices = [line.split()[0] for line in lines if line.strip()]
    total = meminfo(ctx.root).get("SwapTotal", 0)
    observed = f"{len(devices)} device(s), {total / 2**30:.1f} GiB" if devices else "no swap"
    if not devices:
        return Finding(Grade.PASS, observed, "no swap", "/proc/swaps")
    return Finding(Grade.WARN, observed, "no swap", "/proc/swaps", needs_root=True,
                   fix="swapoff -a and remove swap from /etc/fstab (manual: may trigger the OOM killer)",
                   note="host pages a GPU job touches must never come back from disk")


def swappiness(ctx: AuditContext) -> Finding:
    path = "/proc/sys/vm/swappiness"
    value = read(ctx.root, path)
    rec = f"<= {SWAPPINESS_MAX}"
    if value is None:
        return Finding(Grade.SKIP, "absent", rec, path)
    if int(value) <= SWAPPINESS_MAX:
        return Finding(Grade.PASS, value, rec, path)
    if not (read(ctx.root, "/proc/swaps") or "").splitlines()[1:]:
        return Finding(Grade.PASS, value, rec, path, note="no swap device: only matters once swap exists")
    return Finding(Grade.WARN, value, rec, path, fix=f"sysctl -w vm.swappiness={SWAPPINESS_MAX}", needs_root=True)


def dirty(ctx: AuditContext) -> Finding:
    vals = {k: read(ctx.root, f"/proc/sys/vm/{k}") for k in
            ("dirty_ratio", "dirty_background_ratio", "dirty_bytes", "dirty_background_bytes")}
    source = "/proc/sys/vm/dirty_{ratio,background_ratio,bytes,background_bytes}"
    ratio, background = DIRTY_TARGETS[ctx.profile]
    rec = f"dirty_ratio {ratio}, dirty_background_ratio {background}"
    if vals["dirty_ratio"] is None:
        return Finding(Grade.SKIP, "absent", rec, source)
    if (vals["dirty_bytes"] or "0") != "0" or (vals["dirty_background_bytes"] or "0") != "0":
        observed = f"dirty_bytes {vals['dirty_bytes']}, dirty_background_bytes {vals['dirty_background_bytes']}"
        return Finding(Grade.PASS, observed, rec, source, note="limits set in bytes; the ratios do not apply")
    cur, bg = int(vals["dirty_ratio"]), int(vals["dirty_background_ratio"] or 0)
    observed = f"dirty_ratio {cur}, dirty_background_ratio {bg}"
    ok = cur >= ratio if ctx.profile == "training" else (cur <= ratio and bg <= background)
    if ok:
        return Finding(Grade.PASS, observed, rec, source)
    return Finding(Grade.WARN, observed, rec, source, needs_root=True,
                   fix=f"sysctl -w vm.dirty_ratio={ratio} vm.dirty_background_ratio={background}",
                   note=ctx.by_profile("more page cache absorbs checkpoint bursts without stalling the step",
                                       "smaller bursts of writeback keep tail latency flat"))


def memlock(ctx: AuditContext) -> Finding:
    source = "/proc/self/limits (Max locked memory)"
    for line in (read(ctx.root, "/proc/self/limits") or "").splitlines():
        if line.startswith("Max locked memory"):
            soft, hard = line.split()[3:5]
            break
    else:
        return Finding(Grade.UNKNOWN, "not found", "unlimited", source)
    observed = f"soft {soft}, hard {hard}"
    if soft == "unlimited":
        return Finding(Grade.PASS, observed, "unlimited", source)
    return Finding(Grade.WARN, observed, "unlimited", source, needs_root=True,
                   fix="memlock unlimited: /etc/security/limits.d, systemd LimitMEMLOCK=infinity, "
                       "docker --ulimit memlock=-1:-1",
                   note="RDMA registration (NCCL over InfiniBand, GPUDirect) locks host memory")


def _shm_bytes(root: Path, mount: Mount) -> int:
    size = mount.option("size")
    if size is not None:
        return parse_size(size)
    st = os.statvfs(under(root, "/dev/shm"))
    return st.f_blocks * st.f_frsize


def shm(ctx: AuditContext) -> Finding:
    source = "/proc/self/mountinfo (/dev/shm size=), statvfs"
    rec = f">= {SHM_WARN_BYTES >> 30} GiB"
    mount = mount_of("/dev/shm", mounts(ctx.root))
    if mount is None or mount.point != "/dev/shm":
        return Finding(Grade.FAIL, "/dev/shm not mounted", rec, source,
                       fix="mount a tmpfs on /dev/shm (docker --ipc=host or --shm-size=16g)",
                       note="DataLoader workers pass batches through /dev/shm")
    size = _shm_bytes(ctx.root, mount)
    observed = f"{mount.fstype} {size / 2**30:.2f} GiB"
    fix = "docker run --ipc=host (or --shm-size=16g); Kubernetes: emptyDir medium Memory at /dev/shm"
    if size < SHM_FAIL_BYTES:
        return Finding(Grade.FAIL, observed, rec, source, fix=fix,
                       note="multi-worker DataLoaders die with 'bus error' once batches outgrow it")
    if size < SHM_WARN_BYTES:
        return Finding(Grade.WARN, observed, rec, source, fix=fix)
    return Finding(Grade.PASS, observed, rec, source)


CHECKS = (
    ("mem.thp.enabled", thp_enabled),
    ("mem.thp.defrag", thp_defrag),
    ("mem.swap", swap),
    ("mem.swappiness", swappiness),
    ("mem.dirty", dirty),
    ("mem.memlock", memlock),
    ("mem.shm", shm),
)
