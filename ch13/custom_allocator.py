"""Allocator shim: set PyTorch's CUDA caching-allocator options and check they took effect.

Reusable from any chapter when debugging fragmentation::

    from custom_allocator import AllocatorConfig, apply, verify
    cfg = AllocatorConfig(expandable_segments=True, garbage_collection_threshold=0.8)
    apply(cfg)              # before CUDA starts: via PYTORCH_ALLOC_CONF; after: at run time
    report = verify(cfg)    # report.problems == [] when every observable option is in effect

What each option does (PyTorch's CUDA memory-management notes):

- ``expandable_segments``: segments are virtual-memory ranges that grow page by page instead of
  fixed cudaMalloc blocks, so blocks of changing sizes stop stranding free memory (the
  recommended fix for fragmentation from varying shapes).
- ``max_split_size_mb``: blocks larger than this are never split, so big free blocks are not
  carved into pieces a later large request cannot use.
- ``garbage_collection_threshold``: when reserved memory passes this fraction of the limit,
  the allocator frees unused cached blocks before calling cudaMalloc again.
- ``roundup_power2_divisions``: rounds request sizes to fewer distinct sizes, so freed blocks
  fit later requests.
- ``backend``: ``native`` (the caching allocator) or ``cudaMallocAsync`` (CUDA's stream-ordered
  pool); chosen once, before CUDA starts.

``verify`` checks what the process can observe: the backend, ``max_split_size`` from
``memory_stats()``, and whether a freshly allocated 64 MiB block sits in an expandable segment
(memory snapshot; cached free segments are released first, but a partly used segment from
before a run-time change can still serve the probe, so verify right after apply). The
garbage-collection threshold and round-up divisions leave no readable trace; they are listed
as unverified rather than claimed.

Run: python ch13/custom_allocator.py --expandable-segments --max-split-size-mb 256
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from typing import Literal

import torch

ENV_VARS = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")
PROBE_BYTES = 64 << 20


@dataclass(frozen=True)
class AllocatorConfig:
    backend: Literal["native", "cudaMallocAsync"] = "native"
    """Allocator implementation; fixed once CUDA has started."""
    expandable_segments: bool = False
    """Grow segments by mapping pages instead of new cudaMalloc blocks."""
    max_split_size_mb: int | None = None
    """Blocks above this size are never split (None: no limit)."""
    garbage_collection_threshold: float | None = None
    """Fraction of the memory limit above which cached blocks are reclaimed (0 < t < 1)."""
    roundup_power2_divisions: int | None = None
    """Power-of-two divisions that request sizes are rounded to (a power of 2)."""

    def conf(self, with_backend: bool = True) -> str:
        """The PYTORCH_ALLOC_CONF string for these options."""
        parts = [f"backend:{self.backend}"] if with_backend and self.backend != "native" else []
        if self.expandable_segments:
            parts.append("expandable_segments:True")
        if self.max_split_size_mb is not None:
            parts.append(f"max_split_size_mb:{self.max_split_size_mb}")
        if self.garbage_collection_threshold is not None:
            parts.append(f"garbage_collection_threshold:{self.garbage_collection_threshold}")
        if self.roundup_power2_divisions is not None:
            parts.append(f"roundup_power2_divisions:{self.roundup_power2_divisions}")
        return ",".join(parts)


@dataclass(frozen=True)
class Observed:
    """What the running process shows about its allocator."""

    backend: str
    max_split_size: int | None
    """memory_stats()["max_split_size"] in bytes (None where not reported)."""
    probe_expandable: bool | None
    """Whether a fresh 64 MiB block landed in an expandable segment (None: not observable)."""


@dataclass
class Verification:
    confirmed: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def apply(cfg: AllocatorConfig) -> str:
    """Put ``cfg`` in effect; returns the settings string used.

    Before CUDA starts the string goes into the environment, where the allocator reads it at
    start-up. After, the options are set at run time (they apply to segments created from then
    on); the backend cannot change any more and asking for another one raises.
    """
    if not torch.cuda.is_initialized():
        for var in ENV_VARS:
            os.environ[var] = cfg.conf()
        return cfg.conf()
    current = torch.cuda.memory.get_allocator_backend()
    if current != cfg.backend:
        raise RuntimeError(f"allocator backend is already '{current}'; '{cfg.backend}' must be chosen "
                           "before CUDA initializes (set it first thing in the process)")
    torch.cuda.memory._set_allocator_settings(cfg.conf(with_backend=False) or "expandable_segments:False")
    return cfg.conf()


def _probe_expandable(device: torch.device) -> bool | None:
    torch.cuda.empty_cache()
    probe = torch.empty(PROBE_BYTES, dtype=torch.uint8, device=device)
    address = probe.data_ptr()
    for seg in torch.cuda.memory._snapshot(device)["segments"]:
        if seg["address"] <= address < seg["address"] + seg["total_size"]:
            return seg.get("is_expandable")
    return None


def observe(device: torch.device | None = None) -> Observed:
    """Read the live allocator's state (initializes CUDA)."""
    device = device or torch.device("cuda")
    backend = torch.cuda.memory.get_allocator_backend()
    if backend != "native":
        return Observed(backend, None, None)
    expandable = _probe_expandable(device)
    stats = torch.cuda.memory_stats(device)
    return Observed(backend, stats.get("max_split_size"), expandable)


def check(cfg: AllocatorConfig, seen: Observed) -> Verification:
    """Compare the asked-for options with what the allocator shows."""
    v = Verification()
    if seen.backend != cfg.backend:
        v.problems.append(f"backend is '{seen.backend}', asked for '{cfg.backend}'")
        return v
    v.confirmed.append(f"backend {seen.backend}")
    if cfg.backend != "native":
        v.unverified.append("native-allocator options do not apply to cudaMallocAsync")
        return v
    _check_expandable(cfg, seen, v)
    _check_max_split(cfg, seen, v)
    if cfg.garbage_collection_threshold is not None:
        v.unverified.append("garbage_collection_threshold (no observable trace)")
    if cfg.roundup_power2_divisions is not None:
        v.unverified.append("roundup_power2_divisions (no observable trace)")
    return v


def _check_expandable(cfg: AllocatorConfig, seen: Observed, v: Verification) -> None:
    if seen.probe_expandable is None:
        v.unverified.append("expandable_segments (this PyTorch's snapshot does not report it)")
    elif seen.probe_expandable == cfg.expandable_segments:
        v.confirmed.append(f"expandable_segments {cfg.expandable_segments} (a fresh block's segment)")
    else:
        v.problems.append(f"a fresh block landed in a segment with is_expandable={seen.probe_expandable}, "
                          f"asked for expandable_segments={cfg.expandable_segments}")


def _check_max_split(cfg: AllocatorConfig, seen: Observed, v: Verification) -> None:
    if cfg.max_split_size_mb is None:
        return
    want = cfg.max_split_size_mb << 20
    if seen.max_split_size is None:
        v.unverified.append("max_split_size_mb (memory_stats has no max_split_size)")
    elif seen.max_split_size == want:
        v.confirmed.append(f"max_split_size {want} bytes")
    else:
        v.problems.append(f"memory_stats max_split_size is {seen.max_split_size}, asked for {want}")


def verify(cfg: AllocatorConfig, device: torch.device | None = None) -> Verification:
    """Observe the live allocator and check it against ``cfg``."""
    return check(cfg, observe(device))


def _parse(argv: list[str] | None) -> AllocatorConfig:
    p = argparse.ArgumentParser(description="Apply allocator options, then verify they are in effect.")
    p.add_argument("--backend", choices=["native", "cudaMallocAsync"], default="native", help="the CUDA caching allocator (native) or cudaMallocAsync")
    p.add_argument("--expandable-segments", action="store_true", help="let segments grow instead of allocating new ones (less fragmentation)")
    p.add_argument("--max-split-size-mb", type=int, help="blocks above this size are never split (MB)")
    p.add_argument("--gc-threshold", type=float, help="reclaim cached blocks once usage passes this fraction of the memory (0..1)")
    p.add_argument("--roundup-power2-divisions", type=int, help="round allocation sizes up to this many divisions per power of two")
    a = p.parse_args(argv)
    return AllocatorConfig(a.backend, a.expandable_segments, a.max_split_size_mb, a.gc_threshold,
                           a.roundup_power2_divisions)


def main(argv: list[str] | None = None) -> int:
    cfg = _parse(argv)
    print(f"settings: {apply(cfg) or '(defaults)'}")
    if not torch.cuda.is_available():
        print("SKIPPED: needs a CUDA GPU to observe the allocator")
        return 0
    report = verify(cfg)
    for line in report.confirmed:
        print(f"  in effect: {line}")
    for line in report.unverified:
        print(f"  not checkable: {line}")
    for line in report.problems:
        print(f"  NOT in effect: {line}")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
