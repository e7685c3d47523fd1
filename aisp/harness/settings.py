"""Process-wide state both variants share (torch's settings, limits of the CUDA context, the globals
of the pair's own modules): restored before each call of a variant, and the variant that changed it
named in its notes."""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch


def _attribute(owner: Any, name: str) -> tuple[Callable[[], Any], Callable[[Any], None]]:
    return (lambda: getattr(owner, name)), (lambda value: setattr(owner, name, value))


TORCH_SETTINGS: dict[str, tuple[Callable[[], Any], Callable[[Any], None]]] = {
    "float32_matmul_precision": (torch.get_float32_matmul_precision, torch.set_float32_matmul_precision),
    "cuda.matmul.allow_tf32": _attribute(torch.backends.cuda.matmul, "allow_tf32"),
    **{f"cudnn.{name}": _attribute(torch.backends.cudnn, name) for name in ("allow_tf32", "benchmark", "deterministic")},
    "num_threads": (torch.get_num_threads, torch.set_num_threads),
    "default_dtype": (torch.get_default_dtype, torch.set_default_dtype),
    "deterministic_algorithms": (
        lambda: (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()),
        lambda value: torch.use_deterministic_algorithms(value[0], warn_only=value[1])),
}
"""Name → (read, write), restored in this order (the matmul precision also sets allow_tf32)."""


CUDA_LIMIT_PERSISTING_L2 = 0x06
"""``cudaLimitPersistingL2CacheSize`` in the CUDA runtime's ``cudaLimit`` enum."""
_CUDART_CALLS = ("cudaGetDevice", "cudaDeviceGetLimit", "cudaDeviceSetLimit", "cudaCtxResetPersistingL2Cache",
                 "cudaGetLastError")


def mapped_cudart(maps: list[str]) -> list[str]:
    """Paths of CUDA runtimes among the lines of ``/proc/self/maps`` (each once, in order)."""
    paths = [parts[5].strip() for line in maps if len(parts := line.split(maxsplit=5)) == 6]
    return list(dict.fromkeys(p for p in paths if os.path.basename(p).startswith("libcudart.so")))


@functools.cache
def cudart() -> ctypes.CDLL | None:
    """The CUDA runtime torch loaded, through ctypes (``torch.cuda.cudart()`` lacks the limit calls):
    found among the process's mapped libraries, else its global symbols; None in a CPU build or where
    none has the calls. Any runtime acts on torch's primary context."""
    if torch.version.cuda is None:
        return None
    try:
        with open("/proc/self/maps") as maps:
            paths: list[str | None] = [*mapped_cudart(maps.readlines()), None]
    except OSError:
        paths = [None]
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        if all(hasattr(lib, name) for name in _CUDART_CALLS):
            lib.cudaDeviceSetLimit.argtypes = [ctypes.c_int, ctypes.c_size_t]
            return lib
    return None


_UNWATCHED: set[int] = set()
"""Devices whose persisting-L2 limit could not be read (no such limit there, e.g. under MIG)."""


def read_persisting_l2() -> tuple[int, int] | None:
    """(current device, its context's ``cudaLimitPersistingL2CacheSize``); None before torch has
    initialised CUDA (no context is created here), in a CPU build, or where it cannot be read (the
    error cleared, so torch's next launch check does not report it)."""
    lib = cudart() if torch.cuda.is_initialized() else None
    device, value = ctypes.c_int(), ctypes.c_size_t()
    if lib is None:
        return None
    if lib.cudaGetDevice(ctypes.byref(device)):
        lib.cudaGetLastError()
        return None
    if device.value not in _UNWATCHED and lib.cudaDeviceGetLimit(ctypes.byref(value), CUDA_LIMIT_PERSISTING_L2):
        lib.cudaGetLastError()
        _UNWATCHED.add(device.value)
    return None if device.value in _UNWATCHED else (device.value, value.value)


def write_persisting_l2(value: int) -> None:
    """Every persisting L2 line back to normal, then the current context's set-aside to ``value``."""
    lib = cudart()
    assert lib is not None, "written only after a read through it"
    if status := lib.cudaCtxResetPersistingL2Cache() or lib.cudaDeviceSetLimit(CUDA_LIMIT_PERSISTING_L2, value):
        lib.cudaGetLastError()
        raise RuntimeError(f"could not restore cudaLimitPersistingL2CacheSize to {value} bytes (status {status})")


CONTEXT_SETTINGS: dict[str, tuple[Callable[[], tuple[int, Any] | None], Callable[[Any], None]]] = {
    "cudaLimitPersistingL2CacheSize": (read_persisting_l2, write_persisting_l2)}
"""Name → (read, write) of limits of the current CUDA context; ``read()`` gives (device, value), or
None where the limit cannot be read now; the first value read on a device is its snapshot. A
persisting-L2 set-aside left by one variant (an access-policy window) shrinks L2 for the others."""


def _read(get: Callable[[], Any]) -> Any:
    try:
        return get()
    except RuntimeError:  # torch refuses legacy TF32 reads once the new fp32_precision API was used
        return None


class ProcessSettings:
    """A snapshot taken before any pair code runs; module globals compared by identity (a global
    rebound counts, an object changed in place does not)."""

    def __init__(self, folder: Path, notes: list[str]) -> None:
        self.folder, self.blame = folder.resolve(), notes
        self.torch = {name: _read(get) for name, (get, _) in TORCH_SETTINGS.items()}
        self.context: dict[tuple[str, int], Any] = {}
        """(name, device) → its first value read: here where CUDA is initialised, else at the first call
        after (in the harness, the first optimized setup's: the baseline's first setup goes unseen)."""
        self._restore_context()
        self.modules: dict[str, tuple[ModuleType, dict[str, Any]]] = {}

    def enter(self, notes: list[str] | None) -> None:
        """Before other code runs: undo what changed since the last call, noting it in the notes of
        whoever ran since (``self.blame``); ``notes`` belong to the code about to run."""
        changed = [name for name, (get, _) in TORCH_SETTINGS.items()
                   if self.torch[name] is not None and _read(get) != self.torch[name]]
        for name in changed:
            TORCH_SETTINGS[name][1](self.torch[name])
        changed += self._restore_context()
        for module, snapshot in self.modules.values():
            for key in [k for k, v in snapshot.items() if vars(module).get(k, snapshot) is not v]:
                setattr(module, key, snapshot[key])
                changed.append(f"{module.__name__}.{key}")
        note = f"changed process-wide {', '.join(changed)}; restored before each timed call"
        if changed and self.blame is not None and note not in self.blame:
            self.blame.append(note)
        self.blame = notes

    def _restore_context(self) -> list[str]:
        """Each context limit: snapshot where first read, else written back where it differs."""
        changed = []
        for name, (read, write) in CONTEXT_SETTINGS.items():
            if (now := read()) is not None and (snapshot := self.context.setdefault((name, now[0]), now[1])) != now[1]:
                write(snapshot)
                changed.append(name)
        return changed

    def snapshot_modules(self) -> None:
        """Snapshot the pair's modules imported since the last snapshot (called after loading and
        after setup, not before each call: globbing and resolving the folder's files took 0.56 ms a
        call for ch13 and left the CPU cache cold right before the timed window)."""
        for path in self.folder.glob("*.py"):
            module = sys.modules.get(path.stem)
            if path.stem not in self.modules and Path(getattr(module, "__file__", None) or "/").resolve() == path:
                self.modules[path.stem] = (module, dict(vars(module)))
