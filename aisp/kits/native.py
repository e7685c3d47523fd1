"""CUDA C++ for chapters: build ``.cu`` files into a shared library for this GPU, cached, and load it.

A chapter declares a :class:`Library` (its sources and extra nvcc flags) and calls
``Library.load(device)`` in ``setup()``: nvcc builds ``lib<name>-sm<arch>-<key>.so`` into the cache
folder (``$AISP_NATIVE_CACHE``, default ``~/.cache/aisp/native``) the first time, and later runs
reuse it until a source, a header it includes from its folder, the flags, the GPU architecture or
nvcc's version changes. Two processes building the same library at once build it once: the second
waits on a file lock, then reuses it. Kernels take the caller's stream (:func:`stream`) so they
order with PyTorch's work and the harness times them.

Code with Hopper-only instructions (``wgmma``, ``setmaxnreg``) builds for ``sm_90a`` and is refused
for any other GPU. :meth:`Library.compile_only` compiles for a given architecture without a GPU (CI).
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from aisp.harness.benchmark import Requirements, default_device, unmet_requirements

REQUIRES = Requirements(cuda=True, executables=("nvcc",))
"""What a pair built from CUDA C++ needs: a GPU to run on and nvcc to build."""
BASE_FLAGS = ("-O3", "-std=c++17", "-lineinfo")
"""nvcc flags of every library; a Library's own flags follow its sources."""
HOPPER_ONLY = re.compile(r"\b(wgmma|setmaxnreg)\b")
"""Instructions that exist only on sm_90a: a source naming one builds for sm_90a."""
LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


def cache_dir() -> Path:
    """Where built libraries live: ``$AISP_NATIVE_CACHE``, else ``~/.cache/aisp/native``."""
    return Path(os.environ.get("AISP_NATIVE_CACHE") or Path.home() / ".cache" / "aisp" / "native")


def stream(device: torch.device | None = None) -> ctypes.c_void_p:
    """The caller's current CUDA stream on ``device`` (its index, else the current device), for a kernel
    to launch on. Read as the raw handle (``torch._C._cuda_getCurrentRawStream``, what Triton's launcher
    reads): ``torch.cuda.current_stream(device)`` builds a Stream object first, 9 us a call on an H200
    host against a 26 us ``run()`` of ch02's mapped gather, timed from idle (2026-11-30). A build of
    torch without it takes that path."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is None:
        return ctypes.c_void_p(torch.cuda.current_stream(device).cuda_stream)
    index = device.index if device is not None and device.index is not None else torch.cuda.current_device()
    return ctypes.c_void_p(raw(index))


def ptr(t: torch.Tensor) -> ctypes.c_void_p:
    """A tensor's first element's address, for a C function's pointer argument."""
    return ctypes.c_void_p(t.data_ptr())


def check(status: int, what: str) -> None:
    """Raise when a library call returned a non-zero status."""
    if status:
        raise RuntimeError(f"{what} failed with status {status}")


def nvcc() -> str:
    """The path of nvcc on PATH; a RuntimeError when there is none."""
    path = shutil.which("nvcc")
    if path is None:
        raise RuntimeError("nvcc (the CUDA toolkit) is not on PATH: it is needed to build CUDA C++")
    return path


def cuobjdump() -> str | None:
    """cuobjdump (with nvdisasm beside it) on PATH, in ``$CUDA_HOME/bin``, or from the
    ``nvidia-cuda-cuobjdump`` and ``nvidia-cuda-nvdisasm`` wheels; None when there is none."""
    cuda_bin = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin"
    found = shutil.which("cuobjdump") or shutil.which("cuobjdump", path=str(cuda_bin))
    if found:
        return found
    try:
        import nvidia
    except ImportError:
        return None
    wheels = [p for root in nvidia.__path__ for p in Path(root).glob("cu*/bin/cuobjdump")]
    return str(wheels[0]) if wheels else None


@functools.cache
def nvcc_version(path: str) -> str:
    """``nvcc --version`` of the nvcc at ``path``: part of every library's cache key."""
    return subprocess.run([path, "--version"], capture_output=True, text=True, check=True).stdout


def device_arch(device: torch.device | None = None) -> str:
    """The GPU's compute capability as nvcc's architecture: "80", "90" (H100/H200), "100" (B200)."""
    return "{}{}".format(*torch.cuda.get_device_capability(device))


def hopper_refusal(arch: str) -> str | None:
    """Why sm_90a code cannot be built for ``arch``, or None when ``arch`` is sm_90."""
    if arch.removesuffix("a") == "90":
        return None
    return f"uses Hopper-only instructions (wgmma/setmaxnreg, sm_90a): needs an sm_90 GPU (H100/H200), not sm_{arch}"


def unavailable(device: torch.device | None = None, *, hopper_only: bool = False) -> str | None:
    """Why CUDA C++ cannot be built and run here (no nvcc, no GPU, or for Hopper-only code a GPU
    other than sm_90), or None when it can."""
    if shutil.which("nvcc") is None:
        return "needs nvcc (the CUDA toolkit) on PATH to build CUDA C++"
    device = device or default_device()
    reason = unmet_requirements(REQUIRES, device)
    if reason or not hopper_only:
        return reason
    return hopper_refusal(device_arch(device))


def local_includes(sources: Sequence[Path]) -> list[Path]:
    """The files that ``sources`` ``#include "..."`` from their own folders, transitively."""
    found: list[Path] = []
    todo = list(sources)
    while todo:
        src = todo.pop()
        for name in LOCAL_INCLUDE.findall(src.read_text(errors="replace")):
            path = (src.parent / name).resolve()
            if path.is_file() and path not in found and path not in sources:
                found.append(path)
                todo.append(path)
    return sorted(found)


def run_nvcc(command: list[str], cwd: Path) -> None:
    """Run an nvcc command; a RuntimeError carrying the command and nvcc's output when it fails."""
    proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise RuntimeError(f"nvcc failed (exit {proc.returncode}): {shlex.join(command)}\n"
                           f"{proc.stdout}{proc.stderr}")


@dataclass(frozen=True)
class Library:
    """A shared library built by nvcc from ``sources``, named after the first one.

    ``flags`` follow the sources on nvcc's command line, run in the first source's folder:
    defines, ``-I`` include folders (CUTLASS), ``-rdc=true``, libraries (``-lcublas``).
    ``headers``: further files whose change must rebuild it (headers found through ``-I``); the
    ``#include "..."`` files beside the sources are found without being listed. ``hopper_only``
    (build for sm_90a) is, unless given, whether a source or a local include names wgmma or
    setmaxnreg.
    """

    sources: tuple[Path, ...]
    flags: tuple[str, ...] = ()
    headers: tuple[Path, ...] = ()
    hopper_only: bool | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "sources", tuple(Path(p).resolve() for p in self.sources))
        object.__setattr__(self, "flags", tuple(self.flags))
        object.__setattr__(self, "headers", tuple(Path(p).resolve() for p in self.headers))

    @property
    def name(self) -> str:
        return self.sources[0].stem

    def needs_sm90a(self) -> bool:
        """Whether it builds for sm_90a: ``hopper_only``, else found in its code."""
        if self.hopper_only is not None:
            return self.hopper_only
        code = [*self.sources, *local_includes(self.sources)]
        return any(HOPPER_ONLY.search(p.read_text(errors="replace")) for p in code)

    def target(self, arch: str) -> str:
        """The architecture it builds for on ``arch``: "90a" for Hopper-only code (refused with a
        RuntimeError for another arch), else ``arch``."""
        if not self.needs_sm90a():
            return arch
        if reason := hopper_refusal(arch):
            raise RuntimeError(f"{self.name}: {reason}")
        return "90a"

    def key(self, arch: str) -> str:
        """Hash of what the built library depends on: nvcc's version, the architecture, the flags,
        and the contents of the sources, the listed headers and the local includes."""
        h = hashlib.sha256()
        for part in (nvcc_version(nvcc()), arch, *BASE_FLAGS, *self.flags):
            h.update(f"{len(part)}:{part}".encode())
        for path in [*self.sources, *self.headers, *local_includes(self.sources)]:
            data = path.read_bytes()
            h.update(f"{path.name}:{len(data)}:".encode() + data)
        return h.hexdigest()

    def command(self, arch: str, *output: str) -> list[str]:
        """The nvcc command line for ``arch`` (a final target), with ``output`` options."""
        gencode = f"arch=compute_{arch},code=[sm_{arch},compute_{arch}]"
        return [nvcc(), *BASE_FLAGS, "-gencode", gencode, *output, *map(str, self.sources), *self.flags]

    def build(self, arch: str) -> Path:
        """The library built for ``arch`` ("90", no GPU needed), from the cache when it is there."""
        arch = self.target(arch)
        out = cache_dir() / f"lib{self.name}-sm{arch}-{self.key(arch)[:16]}.so"
        if not out.exists():
            out.parent.mkdir(parents=True, exist_ok=True)
            with open(out.with_suffix(".lock"), "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not out.exists():
                    self._link(arch, out)
        return out

    def _link(self, arch: str, out: Path) -> None:
        """nvcc into a temporary file beside ``out``, then renamed to ``out`` in one step."""
        fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.stem}-", suffix=".so")
        os.close(fd)
        try:
            run_nvcc(self.command(arch, "-shared", "-Xcompiler", "-fPIC", "-o", tmp), self.sources[0].parent)
            os.replace(tmp, out)
        finally:
            Path(tmp).unlink(missing_ok=True)

    def load(self, device: torch.device | None = None,
             signatures: Mapping[str, Sequence[type]] | None = None) -> ctypes.CDLL:
        """The library built for ``device``'s GPU (cached), loaded with ctypes; each entry point
        named in ``signatures`` gets those argument types and an int (status) result."""
        handle = ctypes.CDLL(str(self.build(device_arch(device))))
        for name, argtypes in (signatures or {}).items():
            fn = getattr(handle, name)
            fn.argtypes, fn.restype = list(argtypes), ctypes.c_int
        return handle

    def sass(self, arch: str) -> str:
        """The SASS of the library built for ``arch`` ("90"; no GPU needed), from ``cuobjdump -sass``:
        what a test searches for the instruction a pair is about (``HGMMA``, ``UTMALDG``, ``LDGSTS``).
        A RuntimeError when cuobjdump is missing or fails."""
        return self._cuobjdump(arch, "-sass")

    def resource_usage(self, arch: str) -> str:
        """``cuobjdump -res-usage`` of the library built for ``arch``: registers (``REG:``), stack,
        shared and local memory per kernel. A RuntimeError when cuobjdump is missing or fails."""
        return self._cuobjdump(arch, "-res-usage")

    def _cuobjdump(self, arch: str, option: str) -> str:
        tool = cuobjdump()
        if tool is None:
            raise RuntimeError("cuobjdump is not on PATH, in $CUDA_HOME/bin or from the "
                               "nvidia-cuda-cuobjdump wheel")
        env = {**os.environ, "PATH": f"{Path(tool).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        proc = subprocess.run([tool, option, str(self.build(arch))], capture_output=True, text=True,
                              env=env, check=False)
        if proc.returncode:
            detail = (proc.stderr or proc.stdout).strip()[-400:]
            raise RuntimeError(f"cuobjdump {option} {self.name} failed: {detail}")
        return proc.stdout

    def compile_only(self, arch: str) -> None:
        """Compile every source for ``arch`` ("90"; sm_90a for Hopper-only code) without linking or
        keeping anything: no GPU needed. A RuntimeError with nvcc's output when one fails."""
        with tempfile.TemporaryDirectory() as tmp:
            run_nvcc(self.command(self.target(arch), "-c", "-odir", tmp), self.sources[0].parent)
