"""Audit checks of this process's runtime: host allocator, PyTorch CUDA allocator, container, data path."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aisp.system.model import AuditContext, Finding, Grade
from aisp.system.procfs import mount_of, mounts, read

ALLOCATOR_LIBS = {"jemalloc": "libjemalloc", "tcmalloc": "libtcmalloc"}
ALLOCATOR_ENV = {"jemalloc": ("MALLOC_CONF",), "tcmalloc": ("TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES",
                                                            "TCMALLOC_RELEASE_RATE")}
SLOW_FS = {"overlay": "the container's copy-on-write layer", "aufs": "the container's copy-on-write layer",
           "fuse.sshfs": "sshfs", "nfs": "NFS", "nfs4": "NFS", "cifs": "SMB"}


def host_allocator(ctx: AuditContext) -> Finding:
    maps = read(ctx.root, "/proc/self/maps") or ""
    loaded = [name for name, lib in ALLOCATOR_LIBS.items() if lib in maps]
    ignored = [var for name, names in ALLOCATOR_ENV.items() if name not in loaded
               for var in names if var in ctx.env]
    observed = f"loaded: {', '.join(loaded) or 'glibc malloc'}; LD_PRELOAD='{ctx.env.get('LD_PRELOAD', '')}'"
    rec = "jemalloc or tcmalloc preloaded (LD_PRELOAD)"
    source = "/proc/self/maps, environment"
    fix = "export LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2  (Debian/Ubuntu package libjemalloc2)"
    if ignored:
        return Finding(Grade.FAIL, observed + f"; set but ignored: {', '.join(ignored)}", rec, source, fix=fix,
                       note="these variables do nothing unless their allocator is loaded")
    if loaded:
        return Finding(Grade.PASS, observed, rec, source)
    return Finding(Grade.WARN, observed, rec, source, fix=fix,
                   note="the audit inherits the shell's LD_PRELOAD: a job started from it gets the same")


def parse_alloc_conf(text: str) -> dict[str, str]:
    """``PYTORCH_CUDA_ALLOC_CONF`` syntax ("expandable_segments:True,max_split_size_mb:512") as a dict."""
    pairs = (item.split(":", 1) for item in text.split(",") if ":" in item)
    return {key.strip(): value.strip() for key, value in pairs}


def grade_alloc(requested: str, effective: Mapping[str, Any] | None) -> tuple[Grade, str]:
    """Compare the requested CUDA allocator settings with those PyTorch reports as in effect."""
    if effective is None:
        return Grade.UNKNOWN, f"requested '{requested}'; this PyTorch does not report its effective settings"
    want = parse_alloc_conf(requested).get("expandable_segments")
    have = effective.get("expandable_segments")
    observed = f"requested '{requested}'; effective expandable_segments={have}"
    if want is not None and have is not None and (want.lower() == "true") != bool(have):
        return Grade.FAIL, observed + " (request not in effect)"
    return Grade.PASS, observed


def torch_allocator(ctx: AuditContext) -> Finding:
    names = [n for n in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF") if n in ctx.env]
    requested = ",".join(ctx.env[n] for n in names)
    source = "env PYTORCH_CUDA_ALLOC_CONF/PYTORCH_ALLOC_CONF vs torch.cuda.memory._snapshot()['allocator_settings']"
    rec = "what you set is what runs"
    if not ctx.probe_torch:
        return Finding(Grade.SKIP, f"requested '{requested}'", rec, source, note="PyTorch probe turned off")
    import torch

    if not torch.cuda.is_available():
        return Finding(Grade.SKIP, f"requested '{requested}'", rec, source, note="no CUDA here to confirm")
    grade, observed = grade_alloc(requested, torch.cuda.memory._snapshot().get("allocator_settings"))
    fix = "set PYTORCH_CUDA_ALLOC_CONF (some releases ignore PYTORCH_ALLOC_CONF for CUDA, pytorch#183387)"
    return Finding(grade, observed, rec, source, fix=fix if grade is Grade.FAIL else "")


def container(ctx: AuditContext) -> Finding:
    markers = []
    if (ctx.root / ".dockerenv").exists():
        markers.append("docker (/.dockerenv)")
    if (ctx.root / "run/.containerenv").exists():
        markers.append("podman (/run/.containerenv)")
    cgroup = read(ctx.root, "/proc/1/cgroup") or ""
    markers += [f"{word} (/proc/1/cgroup)" for word in ("kubepods", "docker", "containerd", "libpod") if word in cgroup]
    if "KUBERNETES_SERVICE_HOST" in ctx.env:
        markers.append("kubernetes (KUBERNETES_SERVICE_HOST)")
    proc_sys = mount_of("/proc/sys", mounts(ctx.root))
    read_only = proc_sys is not None and "ro" in proc_sys.options
    note = "/proc/sys is read-only here: tune the host, not the container" if read_only else ""
    return Finding(Grade.PASS, ", ".join(markers) or "none detected", "inventory",
                   "/.dockerenv, /run/.containerenv, /proc/1/cgroup, env", note=note)


def data_path(ctx: AuditContext) -> Finding:
    source = "/proc/self/mountinfo"
    rec = "local disk, tmpfs or a parallel filesystem; a bind-mounted volume in containers"
    if ctx.data_path is None:
        return Finding(Grade.SKIP, "no --data-path given", rec, source)
    mount = mount_of(str(ctx.data_path), mounts(ctx.root))
    if mount is None:
        return Finding(Grade.UNKNOWN, f"{ctx.data_path}: no mount found", rec, source)
    observed = f"{ctx.data_path} on {mount.point} ({mount.fstype})"
    if mount.fstype in SLOW_FS:
        return Finding(Grade.WARN, observed, rec, source,
                       fix="docker run -v /host/data:/data (or a PersistentVolume); stage data on local NVMe",
                       note=f"reads go through {SLOW_FS[mount.fstype]}")
    return Finding(Grade.PASS, observed, rec, source)


CHECKS = (
    ("proc.allocator", host_allocator),
    ("proc.torch_alloc", torch_allocator),
    ("proc.container", container),
    ("proc.data_path", data_path),
)
