"""Reading procfs and sysfs under a root path, so tests can point every read at a fake tree."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_SIZE_SUFFIX = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def under(root: Path, path: str) -> Path:
    """``path`` (absolute, e.g. "/proc/sys/vm/swappiness") resolved inside ``root``."""
    return root / path.lstrip("/")


def read(root: Path, path: str) -> str | None:
    """The stripped text of ``path`` under ``root``, or None when it does not exist."""
    try:
        return under(root, path).read_text().strip()
    except (FileNotFoundError, NotADirectoryError):
        return None


def active_choice(text: str) -> str:
    """The bracketed choice of a sysfs selector ("always [madvise] never" -> "madvise").

    A file without brackets (a fake tree after a write, or a single-valued knob) is its own value.
    """
    match = re.search(r"\[([^\]]+)\]", text)
    return match.group(1) if match else text.strip()


def parse_cpulist(text: str) -> list[int]:
    """Parse a kernel cpulist ("0-3,8,10-11") into sorted CPU ids."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return sorted(cpus)


def format_cpulist(cpus: Iterable[int]) -> str:
    """The compact cpulist form of a set of CPU ids ([0,1,2,5] -> "0-2,5")."""
    runs: list[list[int]] = []
    for cpu in sorted(set(cpus)):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def mask_words_to_ids(words: Iterable[int], bits: int = 64) -> list[int]:
    """Ids set in an array of bitmask words, lowest word first (NVML affinity masks)."""
    return [i * bits + b for i, word in enumerate(words) for b in range(bits) if int(word) >> b & 1]


def numa_nodes(root: Path) -> dict[int, list[int]]:
    """NUMA node id -> its CPUs, from /sys/devices/system/node/node*/cpulist ({} when absent)."""
    nodes = {}
    base = under(root, "/sys/devices/system/node")
    for path in sorted(base.glob("node[0-9]*")):
        text = read(root, f"/sys/devices/system/node/{path.name}/cpulist")
        if text is not None:
            nodes[int(path.name[4:])] = parse_cpulist(text)
    return nodes


def status_field(root: Path, name: str, pid: str = "self") -> str | None:
    """One field of /proc/<pid>/status (e.g. "Cpus_allowed_list")."""
    text = read(root, f"/proc/{pid}/status") or ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key == name:
            return value.strip()
    return None


def meminfo(root: Path) -> dict[str, int]:
    """/proc/meminfo as name -> bytes (page counts such as HugePages_Total stay counts)."""
    out = {}
    for line in (read(root, "/proc/meminfo") or "").splitlines():
        key, _, rest = line.partition(":")
        fields = rest.split()
        if fields:
            out[key] = int(fields[0]) * (1024 if len(fields) > 1 and fields[1] == "kB" else 1)
    return out


def parse_size(text: str) -> int:
    """A size as mount options and ulimits write it ("65536k", "8g", "1024") in bytes."""
    text = text.strip().lower()
    if text and text[-1] in _SIZE_SUFFIX:
        return int(text[:-1]) * _SIZE_SUFFIX[text[-1]]
    return int(text)


@dataclass(frozen=True)
class Mount:
    """One line of /proc/self/mountinfo."""

    point: str
    fstype: str
    source: str
    options: tuple[str, ...]
    """Per-mount and per-superblock options together (e.g. "ro", "size=65536k")."""

    def option(self, name: str) -> str | None:
        for opt in self.options:
            key, _, value = opt.partition("=")
            if key == name:
                return value or key
        return None


def mounts(root: Path) -> list[Mount]:
    """The mounts this process sees, from /proc/self/mountinfo."""
    out = []
    for line in (read(root, "/proc/self/mountinfo") or "").splitlines():
        left, _, right = line.partition(" - ")
        lf, rf = left.split(), right.split()
        if len(lf) < 6 or len(rf) < 3:
            continue
        point = lf[4].replace("\\040", " ")
        out.append(Mount(point, rf[0], rf[1], tuple(lf[5].split(",") + rf[2].split(","))))
    return out


def mount_of(path: str, table: list[Mount]) -> Mount | None:
    """The mount holding ``path``: the longest mount point that prefixes it (the last such mount wins)."""
    best: Mount | None = None
    for m in table:
        prefix = m.point.rstrip("/") + "/"
        if (path == m.point or path.startswith(prefix) or m.point == "/") and (
                best is None or len(m.point) >= len(best.point)):
            best = m
    return best


def process_names(root: Path) -> set[str]:
    """The command names (/proc/<pid>/comm) of every process visible here."""
    names = set()
    for comm in under(root, "/proc").glob("[0-9]*/comm"):
        try:
            names.add(comm.read_text().strip())
        except OSError:
            continue
    return names
