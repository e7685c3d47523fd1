"""What a reused worker (``--reuse-workers``) puts back between pairs, so that a pair sees the
process a fresh worker would give it.

A pair may change process-wide state: environment variables, the working folder, ``sys.path``,
torch's switches (TF32, cuDNN autotuning, deterministic algorithms, the default dtype and device,
the attention back ends, its thread count), the CPU affinity, the default random generators,
torch.compile's caches, the CUDA caching allocator's pool. :func:`snapshot` reads all of it once, before the first pair;
:func:`restore` puts it back after each pair, drops the modules the pair imported from the
project's chapter folders (so the next pair imports its own files afresh) and returns what it could
not put back: a worker with anything left over is retired and the next pair gets a fresh process.

What a fresh process would have that this cannot give: an empty CUDA context (kernels loaded by
earlier pairs stay loaded), Triton's and the extensions' in-process caches (compiled once, reused),
and third-party modules imported once. Those make later pairs start faster, not run differently;
the equality of the two modes is tested (tests/test_reuse_workers.py) and measured on the GPU.
"""

from __future__ import annotations

import gc
import os
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

PROJECT = Path(__file__).resolve().parents[2]
PACKAGE = Path(__file__).resolve().parents[1]


def _switches() -> dict[str, tuple[Callable[[], Any], Callable[[Any], Any]]]:
    """torch's process-wide switches: name -> (read, write)."""
    matmul, cudnn, cuda = torch.backends.cuda.matmul, torch.backends.cudnn, torch.backends.cuda

    def attr(obj: Any, name: str) -> tuple[Callable[[], Any], Callable[[Any], Any]]:
        return (lambda: getattr(obj, name)), (lambda value: setattr(obj, name, value))
    switches = {
        "matmul.allow_tf32": attr(matmul, "allow_tf32"),
        "matmul.allow_fp16_reduced_precision_reduction": attr(matmul, "allow_fp16_reduced_precision_reduction"),
        "matmul.allow_bf16_reduced_precision_reduction": attr(matmul, "allow_bf16_reduced_precision_reduction"),
        "cudnn.allow_tf32": attr(cudnn, "allow_tf32"),
        "cudnn.benchmark": attr(cudnn, "benchmark"),
        "cudnn.deterministic": attr(cudnn, "deterministic"),
        "cudnn.enabled": attr(cudnn, "enabled"),
        "float32_matmul_precision": (torch.get_float32_matmul_precision, torch.set_float32_matmul_precision),
        "deterministic_algorithms": (
            lambda: (torch.are_deterministic_algorithms_enabled(),
                     torch.is_deterministic_algorithms_warn_only_enabled()),
            lambda value: torch.use_deterministic_algorithms(value[0], warn_only=value[1])),
        "default_dtype": (torch.get_default_dtype, torch.set_default_dtype),
        "default_device": (lambda: str(torch.get_default_device()), torch.set_default_device),
        "grad_enabled": (torch.is_grad_enabled, torch.set_grad_enabled),
        "num_threads": (torch.get_num_threads, torch.set_num_threads),
    }
    for kind in ("flash", "mem_efficient", "math", "cudnn"):
        read, write = getattr(cuda, f"{kind}_sdp_enabled", None), getattr(cuda, f"enable_{kind}_sdp", None)
        if read is not None and write is not None:
            switches[f"sdp.{kind}"] = (read, write)
    # torch >= 2.9's TF32 settings, after the legacy ones above (which set them too): torch refuses to
    # read a legacy switch once these were written, so they are written only where still different
    for name in ("", "cuda.matmul.", "cudnn.", "cudnn.conv.", "cudnn.rnn.", "mkldnn.", "mkldnn.matmul.",
                 "mkldnn.conv.", "mkldnn.rnn."):
        owner = torch.backends
        for part in filter(None, name.split(".")):
            owner = getattr(owner, part, None)
        if owner is not None and hasattr(owner, "fp32_precision"):
            switches[f"{name}fp32_precision"] = attr(owner, "fp32_precision")
    return switches


def _read(read: Callable[[], Any]) -> Any:
    """A switch's value, or a marker where torch refuses to say (a legacy TF32 switch after the new API was used)."""
    try:
        return read()
    except RuntimeError as exc:
        return f"<unreadable: {str(exc)[:60]}>"


@dataclass
class Snapshot:
    """The process as it was before the first pair."""

    environ: dict[str, str]
    cwd: str
    path: list[str]
    modules: set[str]
    switches: dict[str, Any]
    affinity: set[int] | None = None
    cuda_bytes: int = 0
    """CUDA memory allocated through torch (0 before CUDA is used)."""
    rng: tuple[Any, ...] = ()
    """torch's CPU generator state and seed, Python's ``random`` state, NumPy's global one (None
    before NumPy is imported: a fresh process seeds it from the OS at import, nothing to repeat)."""


def _cuda_used() -> bool:
    """Whether this process has used CUDA (nothing of CUDA's to read or reset before that)."""
    return torch.cuda.is_available() and torch.cuda.is_initialized()


def _cuda_bytes() -> int:
    return torch.cuda.memory_allocated() if _cuda_used() else 0


def snapshot() -> Snapshot:
    affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    return Snapshot(dict(os.environ), os.getcwd(), list(sys.path), set(sys.modules),
                    {name: _read(read) for name, (read, _) in _switches().items()}, affinity, _cuda_bytes(),
                    (torch.get_rng_state(), torch.initial_seed(), random.getstate(),
                     sys.modules["numpy"].random.get_state() if "numpy" in sys.modules else None))


def _pair_module(name: str, module: Any, before: set[str]) -> bool:
    """A module the pair imported from the project's own files outside the aisp package (its chapter's)."""
    origin = getattr(module, "__file__", None)
    if name in before or not origin:
        return False
    path = Path(origin).resolve()
    return path.is_relative_to(PROJECT) and not path.is_relative_to(PACKAGE)


def restore(snap: Snapshot) -> list[str]:
    """Put the process back as ``snap`` found it; returns what is still different (empty: clean).
    torch's own steps come first: resetting torch.compile, or a switch's setter, may import parts of
    torch that set torch's cache variables in the environment, which is put back after them."""
    if "torch._dynamo" in sys.modules:
        torch._dynamo.reset()
    for name, (read, write) in _switches().items():
        if name in snap.switches and _read(read) != snap.switches[name]:
            try:
                write(snap.switches[name])
            except (RuntimeError, ValueError, TypeError):
                pass  # reported below as left over
    os.environ.clear()
    os.environ.update(snap.environ)
    os.chdir(snap.cwd)
    sys.path[:] = snap.path
    for name, module in list(sys.modules.items()):
        if _pair_module(name, module, snap.modules):
            del sys.modules[name]
    if snap.affinity is not None:
        os.sched_setaffinity(0, snap.affinity)
    _restore_rng(snap)
    gc.collect()
    if _cuda_used():
        torch.cuda.synchronize()
        torch.cuda.set_stream(torch.cuda.default_stream())  # a pair may leave its own stream current
        if hasattr(torch._C, "_cuda_clearCublasWorkspaces"):  # cuBLAS's workspaces count as allocated memory
            torch._C._cuda_clearCublasWorkspaces()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    return leftovers(snap)


def _restore_rng(snap: Snapshot) -> None:
    """The default generators as a fresh process has them: torch's CPU one and Python's as they were,
    CUDA's reseeded with the process's seed (a fresh process seeds them alike, at offset 0), NumPy's
    global one as it was where NumPy was imported before the first pair."""
    cpu_state, seed, py_state, np_state = snap.rng
    torch.set_rng_state(cpu_state)
    random.setstate(py_state)
    if np_state is not None:
        sys.modules["numpy"].random.set_state(np_state)
    if _cuda_used():
        torch.cuda.manual_seed_all(seed)


def leftovers(snap: Snapshot) -> list[str]:
    """What differs from ``snap`` now: switch names, ``environ``, ``cwd``, ``path``, ``affinity``,
    ``cuda memory`` (tensors the pair left referenced from outside its own modules)."""
    now = snapshot()
    left = [name for name, value in snap.switches.items() if now.switches.get(name) != value]
    left += [what for what in ("environ", "cwd", "path", "affinity") if getattr(now, what) != getattr(snap, what)]
    if now.cuda_bytes > snap.cuda_bytes:
        left.append(f"cuda memory ({now.cuda_bytes - snap.cuda_bytes} bytes still allocated)")
    return left
