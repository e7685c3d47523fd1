"""CUTLASS for chapters: where its headers are, what a pair built on them requires, its sources as a
native Library with the headers' flags, and :data:`SGEMM`, the CUTLASS 2.x SIMT fp32 GEMM that
ch07:tiled_matmul and ch09:register_tiling share (cutlass_sgemm.cu, beside this file).

CUTLASS is found, in order, at ``$CUTLASS_DIR`` (a CUTLASS checkout, or any folder holding
``include/cutlass/cutlass.h`` or ``cutlass/cutlass.h``) and in the ``nvidia-cutlass`` wheel
(``pip install nvidia-cutlass``: the headers sit in ``cutlass_library/source/include``). Without
them a CUTLASS source compiles to a stub whose ``cutlass_headers()`` returns 0 (the repository-wide
compile check needs no CUTLASS), and :func:`requirements` names the wheel's module, so a pair built
on one is skipped with that reason.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path

from aisp.harness.benchmark import Requirements
from aisp.kits import native

HERE = Path(__file__).resolve().parent
HINT = "pip install nvidia-cutlass (a 6.4 MB wheel holding the headers), or set CUTLASS_DIR to a CUTLASS checkout"
"""How to get the headers: the end of every message about their absence."""


def include() -> Path | None:
    """The folder holding ``cutlass/cutlass.h`` ($CUTLASS_DIR first, then the nvidia-cutlass wheel)."""
    candidates = []
    if os.environ.get("CUTLASS_DIR"):
        root = Path(os.environ["CUTLASS_DIR"]).expanduser()
        candidates += [root / "include", root]
    spec = importlib.util.find_spec("cutlass_library")
    if spec and spec.submodule_search_locations:
        candidates += [Path(p) / "source" / "include" for p in spec.submodule_search_locations]
    return next((c.resolve() for c in candidates if (c / "cutlass" / "cutlass.h").is_file()), None)


def requirements() -> Requirements:
    """CUDA, nvcc, Hopper; and, where no CUTLASS headers are found, the wheel's module, so the pair
    is skipped with a reason naming it."""
    found = include() is not None
    return Requirements(cuda=True, executables=("nvcc",), min_compute_capability=(9, 0),
                        packages=() if found else ("cutlass_library",))


def library(sources: Sequence[Path], hopper_only: bool) -> native.Library:
    """CUTLASS sources as a native Library, with the headers' -I when found (and their version.h
    in its cache key); without them the sources build to their stubs."""
    found = include()
    flags = ("--expt-relaxed-constexpr", "-DNDEBUG", *((f"-I{found}",) if found else ()))
    headers = (found / "cutlass" / "version.h",) if found else ()
    return native.Library(tuple(sources), flags=flags, headers=headers, hopper_only=hopper_only)


def check_headers(handle: ctypes.CDLL, lib: native.Library) -> None:
    """A RuntimeError naming :data:`HINT` when ``handle`` (``lib`` loaded) is the stub built without
    the headers: its ``cutlass_headers()`` returns 0."""
    if not handle.cutlass_headers():
        raise RuntimeError(f"{lib.name} was built without the CUTLASS headers: {HINT}")


SGEMM = library((HERE / "cutlass_sgemm.cu",), hopper_only=False)
"""cutlass_sgemm.cu: ``cutlass_sgemm(a, b, c, m, n, k, stream)``, row-major fp32 C = A @ B (0 on
success; 1 cannot implement, 4 the run failed, else a CUDA error; 1000 from the stub)."""
