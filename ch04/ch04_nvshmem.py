"""NVSHMEM for ``device_initiated_put_multigpu``: where it is installed, the CUDA C++ library built
against it (nvshmem_ring.cu), the settings it runs with on one node, and how a rank joins the job.

NVSHMEM comes from ``$NVSHMEM_HOME`` or the ``nvidia-nvshmem-cu13`` wheel (``pip install
nvidia-nvshmem-cu13``; PyTorch's CUDA 13 wheels depend on it). Device code calling NVSHMEM is
relocatable (``-rdc=true``) and links the static ``libnvshmem_device.a``; the host side links
``libnvshmem_host.so``, found again at run time through the library's RUNPATH.

Bootstrap without MPI: rank 0 asks NVSHMEM for a unique id (the address of a socket it listens on),
torch.distributed broadcasts its bytes, and every rank initializes with it as PE = its rank. NVSHMEM
then stays initialized until the process exits: initializing again after ``nvshmem_finalize`` is
not something every release supports, and a finalize at exit is collective, so a rank that failed
would wait there for its peers instead of exiting. What ``setup()`` allocates, ``teardown()`` frees.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
from pathlib import Path

import torch
import torch.distributed as dist

import aisp
from aisp.kits import native
from aisp.kits.multirank import world_and_rank

HERE = Path(__file__).resolve().parent
SINGLE_NODE = {
    "NVSHMEM_REMOTE_TRANSPORT": "none",  # NVLink/PCIe P2P only: no InfiniBand transport loaded
    "NVSHMEM_DISABLE_NCCL": "1",  # no NCCL communicator of NVSHMEM's own (its collectives are unused)
    "NVSHMEM_DISABLE_NVLS": "1",  # NVLink multicast stays off (the harness sets it too)
    "NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME": "lo",  # the unique id's socket: every rank is on this host
}
"""Set in the environment (where not already set) before NVSHMEM loads: one node, NVLink only."""
MISSING = ("needs NVSHMEM (`pip install nvidia-nvshmem-cu13`, or NVSHMEM_HOME=<prefix>): no nvshmem.h, "
           "libnvshmem_device.a and libnvshmem_host.so found")
UNREACHABLE = ("needs every rank's GPU to reach the next rank's memory over NVLink or PCIe P2P (nvshmem_ptr "
               "returned NULL); a remote transport (InfiniBand) is not used here")
STATUS = {1001: "NVSHMEM is not initialized in this process",
          1002: "nvshmem_malloc returned NULL (NVSHMEM_SYMMETRIC_SIZE sets the heap's size)",
          1003: "NVSHMEM's initialization failed (NVSHMEM_DEBUG=WARN prints why)"}
"""nvshmem_ring.cu's own status codes; any other non-zero status is CUDA's or NVSHMEM's."""
I32, PTR = ctypes.c_int, ctypes.c_void_p
SIGNATURES = {
    "ring_uid_size": [], "ring_ready": [], "ring_get_uid": [PTR], "ring_init": [PTR, I32, I32],
    "ring_alloc": [I32, I32, ctypes.POINTER(PTR), ctypes.POINTER(PTR), ctypes.POINTER(I32)],
    "ring_free": [PTR, PTR],
    "ring_run": [PTR, PTR, PTR, PTR, PTR, I32, I32, ctypes.c_uint64, PTR],
}


def check(status: int, what: str) -> None:
    """Raise when a ring_* call failed, saying what its status means."""
    if status in STATUS:
        raise RuntimeError(f"{what}: {STATUS[status]}")
    native.check(status, what)


def complete(home: Path) -> bool:
    """Whether ``home`` has NVSHMEM's headers, its static device library and its host library."""
    lib = home / "lib"
    return ((home / "include" / "nvshmem.h").is_file() and (lib / "libnvshmem_device.a").is_file()
            and any(lib.glob("libnvshmem_host.so*")))


def nvshmem_home() -> Path | None:
    """``$NVSHMEM_HOME``, else the ``nvidia.nvshmem`` wheel's folder; None when neither is complete."""
    found = [Path(os.environ["NVSHMEM_HOME"])] if os.environ.get("NVSHMEM_HOME") else []
    try:
        spec = importlib.util.find_spec("nvidia.nvshmem")
    except ModuleNotFoundError:  # no ``nvidia`` namespace at all
        spec = None
    if spec is not None and spec.submodule_search_locations:
        found += [Path(p) for p in spec.submodule_search_locations]
    return next((home for home in found if complete(home)), None)


def nvcc_flags(home: Path) -> tuple[str, ...]:
    """nvcc flags for device code calling the NVSHMEM in ``home``: relocatable device code, its
    headers, the static device library, the host library (also found at run time: RUNPATH)."""
    lib = home / "lib"
    host = sorted(lib.glob("libnvshmem_host.so*"), key=lambda p: len(p.name))[0]  # the wheel ships .so.3 only
    return ("-rdc=true", f"-I{home / 'include'}", f"-L{lib}", "-lnvshmem_device", f"-l:{host.name}",
            "-Xlinker", f"-rpath={lib}")


def ring_library(home: Path) -> native.Library:
    """nvshmem_ring.cu built against the NVSHMEM in ``home`` (its version header is part of the key)."""
    return native.Library((HERE / "nvshmem_ring.cu",), flags=nvcc_flags(home),
                          headers=(home / "include" / "non_abi" / "nvshmem_version.h",))


def load(device: torch.device) -> ctypes.CDLL:
    """The ring library for ``device``, NVSHMEM's single-node settings in place; Unavailable without NVSHMEM."""
    home = nvshmem_home()
    if home is None:
        raise aisp.Unavailable(MISSING)
    for key, value in SINGLE_NODE.items():
        os.environ.setdefault(key, value)
    return ring_library(home).load(device, SIGNATURES)


def join(lib: ctypes.CDLL) -> None:
    """This rank joins the NVSHMEM job as PE = its rank (collective; once per process)."""
    if lib.ring_ready():
        return
    world, rank = world_and_rank()
    uid = ctypes.create_string_buffer(lib.ring_uid_size())
    if rank == 0:
        check(lib.ring_get_uid(uid), "nvshmemx_get_uniqueid")
    box = [uid.raw]
    dist.broadcast_object_list(box, src=0)
    check(lib.ring_init(box[0], rank, world), "ring_init")


def alloc(lib: ctypes.CDLL, width: int, rounds: int, device: torch.device) -> tuple[PTR, PTR]:
    """Collective: the symmetric inbox and signals; Unavailable (after freeing them) when any rank
    cannot store into its next rank's memory."""
    inbox, sig, reachable = PTR(), PTR(), I32()
    check(lib.ring_alloc(width, rounds, ctypes.byref(inbox), ctypes.byref(sig), ctypes.byref(reachable)), "ring_alloc")
    everyone = torch.tensor([reachable.value], device=device)
    dist.all_reduce(everyone, op=dist.ReduceOp.MIN)
    if not everyone.item():
        check(lib.ring_free(inbox, sig), "ring_free")
        raise aisp.Unavailable(UNREACHABLE)
    return inbox, sig
