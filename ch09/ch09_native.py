"""Chapter 9's CUDA C++ plumbing (not a pair): where cuBLASLt and the CUTLASS headers are, the
libraries its pairs build, and the check every native GEMM passes against PyTorch in setup().

The CUTLASS search, requirements and flags live in :mod:`aisp.kits.cutlass` (shared with ch07);
the ``cutlass_*`` names here delegate to it for this folder's sources.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path

import torch

import aisp
from aisp.kits import cutlass, native

HERE = Path(__file__).resolve().parent


def _roots() -> list[Path]:
    roots = [Path(p) for p in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")) if p]
    roots.append(Path("/usr/local/cuda"))
    spec = importlib.util.find_spec("nvidia")
    return roots + [Path(p) for p in (spec.submodule_search_locations or [])] if spec else roots


LAYOUTS = ("", "targets/x86_64-linux", "targets/sbsa-linux", "cu13", "cu12")
"""Where include/ and lib/ sit under a root: the toolkit, its targets/, the nvidia-cublas wheel."""


@functools.cache
def cublaslt_flags() -> tuple[str, ...]:
    """-I/-L/-l flags for cuBLASLt from the CUDA toolkit or the nvidia-cublas wheel; ("-lcublasLt",)
    (nvcc's own paths) when neither is found."""
    for home in (root / layout for root in _roots() for layout in LAYOUTS):
        libs = sorted(p for d in ("lib64", "lib") for p in (home / d).glob("libcublasLt.so*"))
        if (home / "include" / "cublasLt.h").is_file() and libs:
            return (f"-I{home / 'include'}", f"-L{libs[0].parent}", f"-l:{libs[0].name}",
                    f"-Xlinker=-rpath,{libs[0].parent}")
    return ("-lcublasLt",)


def cutlass_include() -> Path | None:
    """The folder holding ``cutlass/cutlass.h`` (:func:`aisp.kits.cutlass.include`)."""
    return cutlass.include()


def cutlass_requirements() -> aisp.Requirements:
    """What a CUTLASS pair requires (:func:`aisp.kits.cutlass.requirements`): the wheel's module
    named where no headers are found."""
    return cutlass.requirements()


def cutlass_library(source: str, hopper_only: bool) -> native.Library:
    """A CUTLASS source of this folder as a native Library (:func:`aisp.kits.cutlass.library`)."""
    return cutlass.library((HERE / source,), hopper_only)


TILED = native.Library((HERE / "tiled_gemm.cu",))
"""tiled_gemm.cu: the shared-memory and register-tiled CUDA-core GEMMs."""


def check_gemm(got: torch.Tensor, a: torch.Tensor, b: torch.Tensor, bound: float, what: str) -> None:
    """A native GEMM's first result against ``torch.matmul`` in fp32, before anything is timed:
    relative L2 error under ``bound``."""
    want = a.float() @ b.float()
    error = float((got.float() - want).norm() / want.norm())
    if not error < bound:
        raise AssertionError(f"{what}: relative L2 error {error:.2e} against torch.matmul (bound {bound:.0e})")
