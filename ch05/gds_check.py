"""Is GPUDirect Storage usable here, and if not, why? Checks each layer GDS needs, then tries a read.

GDS needs, bottom up: the ``nvidia-fs`` kernel module (it lets the NVMe DMA into GPU memory), a
file system it supports (ext4/xfs on local NVMe, or a parallel FS with GDS support; not tmpfs or
overlay), ``libcufile`` (the ``nvidia-cufile`` wheel that PyTorch's CUDA build depends on, or the
CUDA toolkit's), and a caller: PyTorch's ``torch.cuda.gds`` (when built with cuFile) or KvikIO.
Without ``nvidia-fs``, cuFile runs its compatibility mode (POSIX reads through pinned buffers),
and KvikIO may run its own: reads still work, but no DMA goes straight to the GPU. The last
check reads a 1 MiB file into GPU memory through ``torch.cuda.gds.GdsFile`` and compares it.

Run: python ch05/gds_check.py [--dir DIR]   (exit code 0 whatever the answer)
"""

from __future__ import annotations

import argparse
import ctypes.util
import os
import sys
import types
from pathlib import Path

import torch
import torch.cuda.gds
from ch05_io import io_root, remove, scratch_dir, seeded_bytes, write_file

GDS_FILE_SYSTEMS = ("ext4", "xfs", "lustre", "gpfs", "wekafs", "beegfs", "nfs")
"""File systems cuFile can drive with GDS (ext4/xfs in ordered data mode on local NVMe)."""

Check = tuple[str, bool, str]
"""(name, ok, detail) of one layer."""


def nvidia_fs() -> Check:
    loaded = Path("/sys/module/nvidia_fs").exists() or Path("/proc/driver/nvidia-fs").exists()
    return "nvidia-fs kernel module", loaded, "loaded" if loaded else "not loaded (GDS DMA impossible)"


def mount_fstype(path: Path, mounts: str) -> str:
    """File system type of the longest mount point in ``mounts`` (/proc/mounts text) holding ``path``."""
    best, fstype = "", "unknown"
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) >= 3 and str(path).startswith(fields[1]) and len(fields[1]) > len(best):
            best, fstype = fields[1], fields[2]
    return fstype


def file_system(folder: Path) -> Check:
    mounts = Path("/proc/mounts").read_text() if Path("/proc/mounts").exists() else ""
    fstype = mount_fstype(folder.resolve(), mounts)
    return "file system", fstype in GDS_FILE_SYSTEMS, f"{folder} is on {fstype}"


def libcufile() -> Check:
    wheel = [p for d in sys.path for p in Path(d).glob("nvidia/cufile/lib/libcufile.so*")] if sys.path else []
    found = str(wheel[0]) if wheel else ctypes.util.find_library("cufile")
    return "libcufile", found is not None, found or "not found (pip install nvidia-cufile-cu12/-cu13)"


def torch_cufile_status() -> tuple[bool, str]:
    """(usable, why): whether this PyTorch can call cuFile through torch.cuda.gds."""
    if not torch.cuda.is_available():
        return False, "no CUDA GPU"
    fn = getattr(torch._C, "_gds_register_handle", None)
    if not isinstance(fn, types.BuiltinFunctionType):  # torch.cuda.gds installs Python stubs that raise
        return False, f"PyTorch {torch.__version__} was built without cuFile"
    return True, f"PyTorch {torch.__version__} built with cuFile"


def kvikio_status() -> Check:
    try:
        import kvikio
    except ImportError:
        return "kvikio", False, "not installed (optional: kvikio-cu13 + libkvikio-cu13)"
    getter = getattr(kvikio.defaults, "get", None)
    mode = getter("compat_mode") if getter else kvikio.defaults.compat_mode()
    return "kvikio", True, f"{kvikio.__version__}, compat_mode={mode}"


def read_probe(folder: Path) -> Check:
    """Read 1 MiB through torch.cuda.gds into GPU memory and compare with what was written."""
    usable, why = torch_cufile_status()
    if not usable:
        return "cuFile read into GPU memory", False, why
    work = scratch_dir("gdscheck") if folder == io_root() else folder
    path = work / "probe.bin"
    try:
        data = seeded_bytes(0, 1 << 20)
        write_file(path, data)
        os.environ.setdefault("CUFILE_LOGFILE_PATH", str(work / "cufile.log"))  # cuFile logs to the cwd otherwise
        dst = torch.empty(data.size, dtype=torch.uint8, device="cuda")
        torch.cuda.gds.GdsFile(str(path), os.O_RDONLY).load_storage(dst.untyped_storage(), offset=0)
        same = bool(torch.equal(dst.cpu(), torch.from_numpy(data)))
        return "cuFile read into GPU memory", same, "1 MiB read, matches" if same else "1 MiB read, WRONG bytes"
    except RuntimeError as exc:
        return "cuFile read into GPU memory", False, f"failed: {exc}"
    finally:
        path.unlink(missing_ok=True)
        (work / "cufile.log").unlink(missing_ok=True)
        if work != folder:
            remove(work)


def verdict(checks: list[Check]) -> str:
    """One line: GDS proper, cuFile compatibility mode only, or no cuFile path, with the reasons."""
    ok = {name: good for name, good, _ in checks}
    reads = ok.get("cuFile read into GPU memory", False)
    missing = [name for name, good, _ in checks if not good and name != "kvikio"]
    if reads and not missing:
        return "GPUDirect Storage usable: cuFile reads can DMA from storage into GPU memory"
    if reads:
        return f"cuFile works in compatibility mode only (POSIX reads + copies); GDS needs: {', '.join(missing)}"
    return f"no cuFile path to GPU memory here; missing: {', '.join(missing) or 'see above'}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=io_root(), help="folder whose file system to check")
    args = parser.parse_args(argv)
    usable, why = torch_cufile_status()
    checks = [nvidia_fs(), file_system(args.dir), libcufile(), ("torch.cuda.gds", usable, why),
              kvikio_status(), read_probe(args.dir)]
    for name, good, detail in checks:
        print(f"[{'ok' if good else '--'}] {name:30s} {detail}")
    print(verdict(checks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
