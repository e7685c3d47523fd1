"""NUMA binding: find a GPU's local CPUs and memory node, bind a process (and DataLoader workers)
to them, and show where threads and memory actually are.

GPU -> CPUs/node comes from NVML (``nvmlDeviceGetCpuAffinity``/``GetMemoryAffinity``), falling back
to sysfs (``/sys/bus/pci/devices/<bdf>/numa_node``, ``local_cpulist``). A CUDA ordinal is mapped to
its NVML device by PCI bus id (from PyTorch) or through ``CUDA_VISIBLE_DEVICES``. Memory binding uses
the ``set_mempolicy`` system call directly, so libnuma is not needed.
"""

from __future__ import annotations

import ctypes
import os
import platform
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from aisp.system.nvml import Nvml, NvmlUnavailable
from aisp.system.procfs import format_cpulist, mask_words_to_ids, numa_nodes, parse_cpulist, read, under

MPOL_DEFAULT, MPOL_PREFERRED, MPOL_BIND = 0, 1, 2
_MASK_WORDS = 16
_SYSCALLS = {"x86_64": (238, 239), "aarch64": (237, 236)}
"""(set_mempolicy, get_mempolicy) numbers per architecture."""


def sysfs_bus_id(bus_id: str) -> str:
    """A PCI bus id in sysfs form: "00000000:3B:00.0" -> "0000:3b:00.0"."""
    domain, bus, devfn = bus_id.strip().lower().split(":")
    return f"{int(domain, 16):04x}:{bus}:{devfn}"


@dataclass(frozen=True)
class Locality:
    """Where a GPU sits: its PCI bus id, local NUMA node (None: unknown) and local CPUs."""

    bus_id: str
    node: int | None
    cpus: tuple[int, ...]
    source: str


def _majority_node(cpus: Sequence[int], nodes: Mapping[int, Sequence[int]]) -> int | None:
    votes = Counter(n for n, members in nodes.items() for c in cpus if c in members)
    return votes.most_common(1)[0][0] if votes else None


def _nvml_locality(nvml: Nvml, index: int, nodes: Mapping[int, Sequence[int]]) -> tuple[int | None, list[int]]:
    ncpus = max((c for cpus in nodes.values() for c in cpus), default=(os.cpu_count() or 1) - 1) + 1
    cpus = mask_words_to_ids(nvml.device(index, "GetCpuAffinity", (ncpus + 63) // 64))
    try:
        mem_nodes = mask_words_to_ids(nvml.device(index, "GetMemoryAffinity", 1 + max(nodes, default=0) // 64, 0))
    except NvmlUnavailable:
        mem_nodes = []
    node = mem_nodes[0] if len(mem_nodes) == 1 else _majority_node(cpus, nodes)
    return node, cpus


def gpu_locality(index: int, nvml: Nvml | None, root: Path = Path("/"), bus_id: str | None = None) -> Locality:
    """The local node and CPUs of NVML device ``index`` (or of ``bus_id`` when NVML is absent)."""
    bus = sysfs_bus_id(bus_id or nvml.bus_id(index))
    nodes = numa_nodes(root)
    if nvml is not None:
        try:
            node, cpus = _nvml_locality(nvml, index, nodes)
            return Locality(bus, node, tuple(cpus), "nvmlDeviceGetCpuAffinity/GetMemoryAffinity")
        except NvmlUnavailable as err:
            why = f" (NVML: {err.kind})"
    else:
        why = " (no NVML)"
    dev = f"/sys/bus/pci/devices/{bus}"
    text = read(root, f"{dev}/numa_node")
    node = int(text) if text is not None and int(text) >= 0 else None
    cpus = parse_cpulist(read(root, f"{dev}/local_cpulist") or "")
    if node is None and len(nodes) == 1:
        node = next(iter(nodes))
    return Locality(bus, node, tuple(cpus), f"{dev}/numa_node, local_cpulist{why}")


def torch_bus_id(ordinal: int) -> str | None:
    """The PCI bus id PyTorch reports for CUDA device ``ordinal`` (None without CUDA)."""
    import torch

    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(ordinal)
    if not hasattr(props, "pci_device_id"):
        return None
    return f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"


def nvml_index(ordinal: int, nvml: Nvml, env: Mapping[str, str], bus_id: str | None = None) -> int:
    """The NVML index of CUDA device ``ordinal``.

    With a bus id (from PyTorch) the match is exact. Otherwise ``CUDA_VISIBLE_DEVICES`` is read:
    a ``GPU-`` UUID is matched exactly; an integer is taken as the NVML (PCI-ordered) index, which is
    right under ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` or when all GPUs are the same model.
    """
    if bus_id is not None:
        wanted = sysfs_bus_id(bus_id)
        for i in range(nvml.device_count()):
            if sysfs_bus_id(nvml.bus_id(i)) == wanted:
                return i
        raise LookupError(f"no NVML device has PCI bus id {bus_id}")
    visible = [e.strip() for e in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if e.strip()]
    if "CUDA_VISIBLE_DEVICES" not in env:
        return ordinal
    entry = visible[ordinal]
    if entry.startswith("MIG-"):
        raise LookupError("MIG UUID in CUDA_VISIBLE_DEVICES: pass the parent GPU's bus id instead")
    if entry.startswith("GPU-"):
        for i in range(nvml.device_count()):
            if nvml.device(i, "GetUUID") == entry:
                return i
        raise LookupError(f"no NVML device has UUID {entry}")
    return int(entry)


def resolve_gpu(ordinal: int, nvml: Nvml | None, root: Path = Path("/"),
                env: Mapping[str, str] | None = None) -> Locality:
    """Locality of CUDA device ``ordinal`` as this process numbers it."""
    env = os.environ if env is None else env
    bus = torch_bus_id(ordinal)
    if nvml is None:
        if bus is None:
            raise LookupError("neither NVML nor a CUDA device: cannot place the GPU")
        return gpu_locality(-1, None, root, bus_id=bus)
    return gpu_locality(nvml_index(ordinal, nvml, env, bus), nvml, root)


def node_cpus(root: Path = Path("/")) -> dict[int, list[int]]:
    """NUMA node id -> its CPUs on this machine ({} without NUMA sysfs)."""
    return numa_nodes(root)


def device_locality(device_type: str, index: int = 0) -> Locality:
    """Locality of CUDA device ``index``; for a CPU run, the node holding most of this process's CPUs."""
    if device_type == "cuda":
        from aisp.system.nvml import open_nvml

        return resolve_gpu(index, open_nvml()[0])
    allowed = os.sched_getaffinity(0)
    nodes = numa_nodes(Path("/")) or {0: sorted(allowed)}
    node = max(nodes, key=lambda n: len(allowed & set(nodes[n])))
    return Locality("cpu", node, tuple(c for c in nodes[node] if c in allowed), "sysfs (CPU run)")


def _mempolicy_calls() -> tuple[ctypes.CDLL, int, int]:
    numbers = _SYSCALLS.get(platform.machine())
    if numbers is None:
        raise OSError(f"set_mempolicy: unknown syscall number on {platform.machine()}")
    return ctypes.CDLL(None, use_errno=True), *numbers


def set_mempolicy(mode: int, nodes: Sequence[int]) -> None:
    """Set the calling thread's memory policy (threads it creates later inherit it)."""
    libc, set_nr, _ = _mempolicy_calls()
    mask = (ctypes.c_ulong * _MASK_WORDS)()
    for node in nodes:
        mask[node // 64] |= 1 << (node % 64)
    arg = mask if nodes else None
    if libc.syscall(set_nr, mode, arg, ctypes.c_ulong(_MASK_WORDS * 64 + 1 if nodes else 0)) != 0:
        raise OSError(ctypes.get_errno(), f"set_mempolicy({mode}, {list(nodes)}) failed")


def get_mempolicy() -> tuple[int, list[int]]:
    """The calling thread's memory policy: (mode, nodes)."""
    libc, _, get_nr = _mempolicy_calls()
    mode, mask = ctypes.c_int(), (ctypes.c_ulong * _MASK_WORDS)()
    if libc.syscall(get_nr, ctypes.byref(mode), mask, ctypes.c_ulong(_MASK_WORDS * 64), None, 0) != 0:
        raise OSError(ctypes.get_errno(), "get_mempolicy failed")
    return mode.value, mask_words_to_ids(mask) if mode.value != MPOL_DEFAULT else []


@dataclass(frozen=True)
class Binding:
    """CPUs to run on and the memory node to allocate from."""

    cpus: tuple[int, ...]
    node: int | None = None
    """None: leave the memory policy alone."""
    strict: bool = False
    """True: MPOL_BIND (fail rather than spill); False: MPOL_PREFERRED (spill when the node is full)."""


def _tasks() -> list[int]:
    return [int(t) for t in os.listdir("/proc/self/task")]


def bind_process(binding: Binding) -> None:
    """Move every thread of this process onto ``binding.cpus`` and set this thread's memory policy.

    Bind first thing: threads created later inherit both; threads that already exist get the CPUs
    but keep their own memory policy (the kernel offers no way to change another thread's).
    """
    for tid in _tasks():
        try:
            os.sched_setaffinity(tid, binding.cpus)
        except ProcessLookupError:
            continue
    if binding.node is not None:
        set_mempolicy(MPOL_BIND if binding.strict else MPOL_PREFERRED, [binding.node])


@contextmanager
def bound(binding: Binding) -> Iterator[None]:
    """Bind for the duration of the block, then restore every thread's CPUs and this thread's policy."""
    saved = {}
    for tid in _tasks():
        try:
            saved[tid] = os.sched_getaffinity(tid)
        except ProcessLookupError:
            continue
    policy = get_mempolicy() if binding.node is not None else None
    bind_process(binding)
    try:
        yield
    finally:
        for tid, cpus in saved.items():
            try:
                os.sched_setaffinity(tid, cpus)
            except ProcessLookupError:
                continue
        if policy is not None:
            set_mempolicy(*policy)


class BindWorker:
    """A DataLoader ``worker_init_fn`` that binds each worker; picklable, makes no CUDA call.

    ``one_core_each``: worker k gets core ``cpus[k % len(cpus)]`` alone instead of all of ``cpus``.
    """

    def __init__(self, binding: Binding, one_core_each: bool = False) -> None:
        self.binding = binding
        self.one_core_each = one_core_each

    def __call__(self, worker_id: int) -> None:
        cpus = self.binding.cpus
        if self.one_core_each:
            cpus = (cpus[worker_id % len(cpus)],)
        bind_process(Binding(cpus, self.binding.node, self.binding.strict))


def split_for_workers(binding: Binding, workers: int) -> tuple[Binding, BindWorker]:
    """The main process's binding and the DataLoader ``worker_init_fn`` for ``workers`` workers.

    With more CPUs than workers, each worker gets one core of its own from the end of the list and
    the main process (and its thread pool) keeps the rest, so they never compete; otherwise all
    share every CPU of the binding.
    """
    cpus = binding.cpus
    if len(cpus) <= workers:
        return binding, BindWorker(binding)
    main = Binding(cpus[: len(cpus) - workers], binding.node, binding.strict)
    return main, BindWorker(Binding(cpus[len(cpus) - workers:], binding.node, binding.strict), one_core_each=True)


@dataclass(frozen=True)
class Placement:
    """Where a process's threads last ran and where its resident memory lies."""

    cpus_allowed: str
    mems_allowed: str
    threads_by_node: dict[int, int]
    memory_by_node: dict[int, int]
    """Resident bytes per node, from /proc/<pid>/numa_maps."""


def _last_cpu(stat: str) -> int:
    return int(stat.rsplit(")", 1)[1].split()[36])


def _memory_by_node(root: Path, pid: str) -> dict[int, int]:
    total: Counter[int] = Counter()
    for line in (read(root, f"/proc/{pid}/numa_maps") or "").splitlines():
        total.update(_memory_by_node_line(line))
    return dict(sorted(total.items()))


def placement(root: Path = Path("/"), pid: str = "self") -> Placement:
    """Read the placement of process ``pid`` (this one by default)."""
    nodes = numa_nodes(root)
    cpu_node = {c: n for n, cpus in nodes.items() for c in cpus}
    threads: Counter[int] = Counter()
    for stat in under(root, f"/proc/{pid}/task").glob("*/stat"):
        try:
            threads[cpu_node.get(_last_cpu(stat.read_text()), -1)] += 1
        except (OSError, IndexError, ValueError):
            continue
    text = read(root, f"/proc/{pid}/status") or ""
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    return Placement(fields.get("Cpus_allowed_list", "").strip(), fields.get("Mems_allowed_list", "").strip(),
                     dict(sorted(threads.items())), _memory_by_node(root, pid))


def describe(p: Placement, local_node: int | None = None) -> str:
    """A few lines on ``p``, flagging threads and memory off ``local_node``."""
    mem = ", ".join(f"node{n}: {b / 2**20:.1f} MiB" for n, b in p.memory_by_node.items()) or "none reported"
    thr = ", ".join(f"node{n}: {k}" for n, k in p.threads_by_node.items())
    lines = [f"allowed CPUs {p.cpus_allowed}, memory nodes {p.mems_allowed}",
             f"threads last ran on: {thr}", f"resident memory: {mem}"]
    if local_node is not None:
        remote_mem = sum(b for n, b in p.memory_by_node.items() if n != local_node)
        remote_thr = sum(k for n, k in p.threads_by_node.items() if n != local_node)
        lines.append(f"off the GPU's node{local_node}: {remote_thr} threads, {remote_mem / 2**20:.1f} MiB")
    return "\n".join(lines)


def local_binding(loc: Locality, allowed: Sequence[int] | None = None, strict: bool = False) -> Binding:
    """The binding for a GPU: its local CPUs this process may use, and its node."""
    allowed = set(os.sched_getaffinity(0) if allowed is None else allowed)
    cpus = tuple(c for c in loc.cpus if c in allowed) or tuple(sorted(allowed))
    return Binding(cpus, loc.node, strict)


def pages_by_node(address: int, root: Path = Path("/")) -> dict[int, int]:
    """Resident bytes per NUMA node of the mapping that holds ``address`` (this process)."""
    start = None
    for line in (read(root, "/proc/self/maps") or "").splitlines():
        lo, _, hi = line.split()[0].partition("-")
        if int(lo, 16) <= address < int(hi, 16):
            start = lo.lstrip("0") or "0"
            break
    for line in (read(root, "/proc/self/numa_maps") or "").splitlines():
        if start is not None and line.split()[0].lstrip("0") == start:
            return _memory_by_node_line(line)
    return {}


def _memory_by_node_line(line: str) -> dict[int, int]:
    fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
    page = int(fields.get("kernelpagesize_kB", "4")) * 1024
    return {int(k[1:]): int(v) * page for k, v in fields.items() if k[0] == "N" and k[1:].isdigit()}


def migrations() -> int | None:
    """How many times the calling thread has moved between CPUs (None: kernel without sched stats)."""
    for line in (read(Path("/"), "/proc/thread-self/sched") or "").splitlines():
        if line.startswith("se.nr_migrations"):
            return int(line.split(":")[1])
    return None


__all__ = ["Binding", "BindWorker", "Locality", "Placement", "bind_process", "bound", "describe",
           "device_locality", "format_cpulist", "gpu_locality", "local_binding", "migrations", "node_cpus", "pages_by_node", "placement",
           "resolve_gpu", "split_for_workers"]
