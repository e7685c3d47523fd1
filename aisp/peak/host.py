"""Host ceilings: the CPU side's memory bandwidth, page-cache read rate and first-touch page-fault rate.

A lesson whose time is the host's (DataLoader batches written and read in host memory, samples read
from page-cached files, the page faults of a fresh buffer) is judged against these figures, not
against HBM or a GPU's FLOPs: ``Workload.link`` ``host_memory``, ``page_cache`` or ``page_faults``
(:data:`aisp.report.roofline.LINK_PEAKS`). They are one host's, shared by every rank on it.

The buffers and the file are 4 x the last-level cache (at least 1 GiB) unless
``PeakConfig.host_bytes`` says otherwise, so the figures are the DRAM's, not the cache's. Each detail
says how the figure was taken: the thread count, the size, the page size the kernel really gave.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from aisp.peak.probes import PeakConfig, ProbeSkipped, measurement, median_ms
from aisp.system.procfs import active_choice, mount_of, mounts, parse_size, read

CPU = torch.device("cpu")
LLC_MULTIPLE = 4
"""Host buffers are this many times the last-level cache, so no pass runs out of the cache."""
MIN_HOST_BYTES = 1 << 30
READ_CHUNK = 1 << 20
"""Bytes per read() of the page-cache probe: large enough that the system call is a small share."""
THP_ENABLED = "/sys/kernel/mm/transparent_hugepage/enabled"


def llc_bytes(cache_dir: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> int:
    """Size of cpu0's last-level cache from sysfs; 0 where sysfs does not say."""
    sizes: dict[int, int] = {}
    for index in cache_dir.glob("index*"):
        try:
            level, size = int((index / "level").read_text()), parse_size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        sizes[level] = max(size, sizes.get(level, 0))
    return sizes[max(sizes)] if sizes else 0


def host_bytes(cfg: PeakConfig) -> int:
    """Size of each host buffer (and of the page-cache file): ``cfg.host_bytes``, else 4 x the LLC,
    at least 1 GiB."""
    return cfg.host_bytes or max(MIN_HOST_BYTES, LLC_MULTIPLE * llc_bytes())


def _random_fill(buf: torch.Tensor) -> None:
    """Fill a uint8 buffer with a 1 MiB random block repeated (one parallel broadcast copy; drawing
    every byte would take seconds on one thread, and a host's DRAM does not compress)."""
    block = torch.randint(0, 256, (min(READ_CHUNK, buf.numel()),), dtype=torch.uint8)
    whole = buf.numel() // block.numel() * block.numel()
    buf[:whole].view(-1, block.numel()).copy_(block.expand(whole // block.numel(), -1))
    buf[whole:].copy_(block[: buf.numel() - whole])


@contextmanager
def threads(count: int) -> Iterator[None]:
    """torch's intra-op thread count set to ``count`` inside the block, restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def memory(cfg: PeakConfig) -> dict[str, dict[str, Any]]:
    """Host memory bandwidth in GB/s: a buffer copy (read and write counted, as ``memory_copy`` counts a
    GPU's) and a fill (writes counted) on torch's intra-op threads, and the copy on one thread."""
    nbytes = host_bytes(cfg)
    src, dst = torch.empty(nbytes, dtype=torch.uint8), torch.empty(nbytes, dtype=torch.uint8)
    _random_fill(src)
    count = torch.get_num_threads()
    copy_ms = median_ms(lambda: dst.copy_(src), CPU, cfg.repeats)
    fill_ms = median_ms(lambda: dst.fill_(0x5A), CPU, cfg.repeats)
    with threads(1):
        one_ms = median_ms(lambda: dst.copy_(src), CPU, cfg.repeats)
    how = f"{nbytes >> 20} MiB (LLC {llc_bytes() >> 20} MiB), median of {cfg.repeats}"
    return {
        "host_memory_copy": measurement(2 * nbytes / (copy_ms * 1e-3) / 1e9, "GB/s",
                                        f"torch copy_ on {count} threads, read+write counted, {how}"),
        "host_memory_fill": measurement(nbytes / (fill_ms * 1e-3) / 1e9, "GB/s",
                                        f"torch fill_ on {count} threads, writes counted, {how}"),
        "host_memory_copy_1thread": measurement(2 * nbytes / (one_ms * 1e-3) / 1e9, "GB/s",
                                                f"torch copy_ on 1 thread, read+write counted, {how}"),
    }


def io_dir() -> Path:
    """Where the page-cache probe writes its file: ``$AISP_IO_DIR`` (as chapter 5's pairs), else the
    system temp folder."""
    return Path(os.environ.get("AISP_IO_DIR") or tempfile.gettempdir())


def page_cache(cfg: PeakConfig) -> dict[str, dict[str, Any]]:
    """Page-cache read rate in GB/s: a file already in the page cache (written and fsynced, then read
    in the warmup) read whole with pread() of 1 MiB at a time into a preallocated buffer, one thread."""
    nbytes, folder = host_bytes(cfg), io_dir()
    data = torch.empty(nbytes, dtype=torch.uint8)
    _random_fill(data)
    view = memoryview(data.numpy())  # also the preallocated buffer the timed reads overwrite
    with tempfile.NamedTemporaryFile(dir=folder, prefix="aisp_peak_page_cache_") as f:
        for offset in range(0, nbytes, 64 * READ_CHUNK):
            f.write(view[offset:offset + 64 * READ_CHUNK])
        f.flush()
        os.fsync(f.fileno())  # clean pages: no writeback runs beside the timed reads
        fd = f.fileno()

        def read_all() -> None:
            for offset in range(0, nbytes, READ_CHUNK):
                os.preadv(fd, [view[offset:offset + READ_CHUNK]], offset)

        ms = median_ms(read_all, CPU, cfg.repeats)
    found = mount_of(str(folder), mounts(Path("/")))
    where = f"{folder} ({found.fstype})" if found else str(folder)
    detail = (f"pread of {READ_CHUNK >> 20} MiB at a time, 1 thread, a {nbytes >> 20} MiB file in the page cache "
              f"on {where} into a preallocated buffer, median of {cfg.repeats}")
    return {"page_cache_read": measurement(nbytes / (ms * 1e-3) / 1e9, "GB/s", detail)}


def huge_page_bytes(address: int) -> int:
    """AnonHugePages of the mapping of this process that holds ``address`` (/proc/self/smaps)."""
    inside = False
    with open("/proc/self/smaps") as fh:
        for line in fh:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= address < hi
            elif inside and head == "AnonHugePages:":
                return int(line.split()[1]) * 1024
    return 0


def touch_fresh(nbytes: int, advice: int) -> tuple[float, int]:
    """(seconds, bytes in huge pages) of one fresh anonymous mapping: mmap, madvise(``advice``) and a
    one-thread memset, its first touch, timed; the unmap after the clock stops."""
    start = time.perf_counter()
    buf = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    buf.madvise(advice)
    anchor = ctypes.c_char.from_buffer(buf)
    address = ctypes.addressof(anchor)
    ctypes.memset(address, 0x5A, nbytes)
    seconds = time.perf_counter() - start
    huge = huge_page_bytes(address)
    del anchor
    buf.close()
    return seconds, huge


def first_touch(cfg: PeakConfig) -> dict[str, dict[str, Any]]:
    """First-touch rate of fresh anonymous memory in GB/s (the page faults, the kernel's zeroing, the
    writes): with 4 KiB pages (MADV_NOHUGEPAGE) and with transparent huge pages asked for
    (MADV_HUGEPAGE); ``first_touch`` is the faster, the ceiling of a fresh buffer."""
    if sys.platform != "linux" or not hasattr(mmap, "MADV_HUGEPAGE"):
        raise ProbeSkipped("Linux only: madvise(MADV_HUGEPAGE) and /proc/self/smaps")
    nbytes, thp = cfg.first_touch_bytes, active_choice(read(Path("/"), THP_ENABLED) or "absent")
    rates, huge = {}, {}
    for name, advice in (("4k", mmap.MADV_NOHUGEPAGE), ("thp", mmap.MADV_HUGEPAGE)):
        touch_fresh(nbytes, advice)  # warmup: the first THP faults may compact memory
        samples = [touch_fresh(nbytes, advice) for _ in range(cfg.repeats)]
        rates[name] = nbytes / statistics.median(s for s, _ in samples) / 1e9
        huge[name] = min(h for _, h in samples)
    how = f"a fresh {nbytes >> 20} MiB mapping, memset by 1 thread (unmap not timed), median of {cfg.repeats}"
    thp_how = f"{huge['thp'] >> 20} of {nbytes >> 20} MiB in 2 MiB pages, THP enabled={thp}"
    return {
        "first_touch": measurement(max(rates.values()), "GB/s",
                                   f"the faster of 4 KiB pages ({rates['4k']:.2f}) and MADV_HUGEPAGE "
                                   f"({rates['thp']:.2f}; {thp_how}); {how}"),
        "first_touch_4k": measurement(rates["4k"], "GB/s", f"MADV_NOHUGEPAGE: 4 KiB pages; {how}"),
        "first_touch_thp": measurement(rates["thp"], "GB/s", f"MADV_HUGEPAGE: {thp_how}; {how}"),
    }
