"""What chapter 5's pairs share: a scratch folder on the disk under test, page-cache control, and
this machine's disk ceiling as ``disk_ceiling.py`` stored it in ``peaks/peak_<key>.json``.

The pairs write their files under :func:`io_root` (``$AISP_IO_DIR``, else the system temp folder),
in a folder of their own that ``teardown()`` removes. Cold reads drop the file's pages from the
page cache with ``posix_fadvise(POSIX_FADV_DONTNEED)`` (clean pages only: writers fsync first).
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from aisp.harness.environment import hardware_key
from aisp.peak.measure import load_peaks

DISK_READ = "disk_read"
"""Name of the sequential-read ceiling in the peaks file (GB/s)."""
DISK_WRITE = "disk_write"
"""Name of the sequential-write ceiling (GB/s, fsync included)."""


def io_root() -> Path:
    """Where the chapter writes its files: ``$AISP_IO_DIR`` or the system temp folder."""
    return Path(os.environ.get("AISP_IO_DIR") or tempfile.gettempdir())


def scratch_dir(name: str) -> Path:
    """A new folder for one variant's files (remove it with :func:`remove`)."""
    return Path(tempfile.mkdtemp(prefix=f"aisp_ch05_{name}_", dir=io_root()))


def remove(folder: Path | None) -> None:
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def write_file(path: Path, data: np.ndarray | bytes) -> None:
    """Write ``data`` and fsync, so its pages are clean and :func:`drop_cache` can evict them."""
    with open(path, "wb") as f:
        f.write(memoryview(data).cast("B") if isinstance(data, np.ndarray) else data)
        f.flush()
        os.fsync(f.fileno())


def drop_cache(path: Path) -> None:
    """Evict ``path``'s clean pages from the page cache, so the next read comes from the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def pread_into(fd: int, dst: torch.Tensor, offset: int) -> None:
    """Fill the contiguous host tensor ``dst`` from ``fd`` at ``offset`` (short reads retried)."""
    view = memoryview(dst.numpy()).cast("B")
    done = 0
    while done < len(view):
        got = os.preadv(fd, [view[done:]], offset + done)
        if got <= 0:
            raise EOFError(f"fd {fd}: end of file at {offset + done}, {len(view) - done} bytes short")
        done += got


def seeded_bytes(seed: int, nbytes: int) -> np.ndarray:
    """``nbytes`` pseudo-random uint8 from ``seed`` (file contents the pairs can check)."""
    return np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)


def machine_key() -> str:
    """The hardware key of one GPU of this machine (``cpu`` without one): where its peaks are kept."""
    return hardware_key(torch.cuda.get_device_name(0), 1) if torch.cuda.is_available() else "cpu"


def disk_ceiling(name: str = DISK_READ) -> float | None:
    """This machine's stored disk ceiling in GB/s (``disk_ceiling.py``), or None if not measured."""
    found = ((load_peaks(machine_key()) or {}).get("measurements") or {}).get(name)
    return float(found["value"]) if found else None


class RateLog:
    """Wall time of each ``run()`` a variant made, to report its achieved rate in ``metrics()``."""

    def __init__(self, nbytes: float) -> None:
        self.nbytes, self.seconds = nbytes, []
        self._start = 0.0

    def start(self) -> None:
        self._start = time.perf_counter()

    def stop(self) -> None:
        self.seconds.append(time.perf_counter() - self._start)

    def metrics(self, ceiling: str | None = DISK_READ) -> dict[str, float]:
        """Median achieved GB/s over the logged calls, and its share of the stored disk ceiling."""
        if not self.seconds:
            return {}
        gbps = self.nbytes / statistics.median(self.seconds) / 1e9
        found = {"achieved_gbps": gbps}
        limit = disk_ceiling(ceiling) if ceiling else None
        if limit:
            found[f"pct_of_{ceiling}"] = 100.0 * gbps / limit
        return found
