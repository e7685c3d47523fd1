"""Measure this machine's disk: sequential write (fsync included) and sequential read, bypassing
the page cache, and store both as chapter 5's IO ceilings in ``peaks/peak_<key>.json``.

Reads use ``O_DIRECT`` (page-aligned buffer, DMA straight into it, the page cache never involved);
where the file system refuses ``O_DIRECT`` (tmpfs, some overlay mounts) the tool falls back to
buffered reads after ``posix_fadvise(POSIX_FADV_DONTNEED)`` on the fsync'ed file, and says so in the
figure's detail. In a VM the "disk" is what the guest sees: the host's own cache may sit under it.

The figures go into the peaks file that ``aisp peak`` wrote for this hardware key (``disk_read``
and ``disk_write``, GB/s, beside ``h2d_pinned``), found as the harness finds it ($AISP_PEAK_DIR,
then ``peaks/``); the chapter's pairs read them back for their ``pct_of_disk_read`` metric.
Without a peaks file it only prints (run ``aisp peak`` first); ``aisp peak --refresh`` rewrites
the file without them, so run this tool again after it.

Run: python ch05/disk_ceiling.py [--size-mib 4096] [--dir DIR] [--save-to DIR] [--no-save]
"""

from __future__ import annotations

import argparse
import mmap
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from ch05_io import DISK_READ, DISK_WRITE, io_root, machine_key, remove, scratch_dir

from aisp.peak.measure import load_peaks, save_peaks


@dataclass(frozen=True)
class DiskConfig:
    size_mib: int = 4096
    """File size; far above any device cache, and the page cache is bypassed anyway."""
    block_mib: int = 16
    """Bytes per read or write call."""
    repeats: int = 3
    """Read passes over the file (the median is stored)."""


def write_file(path: Path, cfg: DiskConfig) -> float:
    """Write the file in blocks (every block different), fsync; return GB/s."""
    block = cfg.block_mib << 20
    seed_block = np.random.default_rng(0).integers(0, 256, block, dtype=np.uint8)
    buf = np.empty_like(seed_block)
    start = time.perf_counter()
    with open(path, "wb") as f:
        for k in range(cfg.size_mib // cfg.block_mib):
            np.bitwise_xor(seed_block, k % 251 + 1, out=buf)
            f.write(memoryview(buf))
        f.flush()
        os.fsync(f.fileno())
    return cfg.size_mib * 2**20 / (time.perf_counter() - start) / 1e9


def open_uncached(path: Path) -> tuple[int, str]:
    """(fd, method): O_DIRECT where the file system allows it, else fadvise(DONTNEED) + buffered."""
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECT), "O_DIRECT"
    except OSError:
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return fd, "posix_fadvise(DONTNEED) then buffered read"


def read_file(path: Path, cfg: DiskConfig) -> tuple[float, str]:
    """One sequential pass over ``path`` that the page cache cannot serve; (GB/s, method)."""
    buf = mmap.mmap(-1, cfg.block_mib << 20)  # page-aligned, as O_DIRECT requires
    fd, method = open_uncached(path)
    total = 0
    try:
        start = time.perf_counter()
        while (got := os.preadv(fd, [buf], total)) > 0:
            total += got
        seconds = time.perf_counter() - start
    finally:
        os.close(fd)
        buf.close()
    return total / seconds / 1e9, method


def measure(cfg: DiskConfig, folder: Path) -> dict[str, dict[str, object]]:
    """``disk_write`` and ``disk_read`` measurements (value, unit, detail) of a file in ``folder``."""
    work = scratch_dir("disk") if folder == io_root() else Path(folder)
    path = work / "ceiling.bin"
    try:
        wrote = write_file(path, cfg)
        reads = [read_file(path, cfg) for _ in range(cfg.repeats)]
    finally:
        path.unlink(missing_ok=True)
        if work != folder:
            remove(work)
    where = f"{cfg.size_mib} MiB file in {folder}, {cfg.block_mib} MiB calls"
    return {DISK_WRITE: {"value": wrote, "unit": "GB/s", "detail": f"sequential write + fsync, {where}"},
            DISK_READ: {"value": statistics.median(g for g, _ in reads), "unit": "GB/s",
                        "detail": f"sequential read, {reads[0][1]}, {where}, median of {cfg.repeats}"}}


def store(found: dict[str, dict[str, object]], save_to: Path | None) -> Path | None:
    """Add ``found`` to this machine's peaks file; None when ``aisp peak`` has not written one."""
    peaks = load_peaks(machine_key())
    if peaks is None:
        return None
    peaks["measurements"].update(found)
    return save_peaks(peaks, save_to)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=DiskConfig.size_mib, help="MiB written then read back")
    parser.add_argument("--dir", type=Path, default=io_root(), help="folder on the disk to measure")
    parser.add_argument("--save-to", type=Path, help="write the peaks file here instead of where it was found")
    parser.add_argument("--no-save", action="store_true", help="print only")
    args = parser.parse_args(argv)
    found = measure(DiskConfig(size_mib=args.size_mib), args.dir)
    for name, m in found.items():
        print(f"{name:10s} {m['value']:8.2f} GB/s  ({m['detail']})")
    if args.no_save:
        return 0
    path = store(found, args.save_to)
    print(f"stored in {path}" if path else "no peaks file for this machine: run 'aisp peak' first, then this tool")
    return 0


if __name__ == "__main__":
    sys.exit(main())
