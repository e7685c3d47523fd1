"""Small helpers shared by chapter 7's CUDA C++ pairs (not a pair itself)."""

from __future__ import annotations

import ctypes
from pathlib import Path

import torch

from aisp.kits import native

HERE = Path(__file__).resolve().parent
PTR, INT, LONG, FLOAT, SIZE = ctypes.c_void_p, ctypes.c_int, ctypes.c_long, ctypes.c_float, ctypes.c_size_t


def library(source: str, *, hopper_only: bool | None = None) -> native.Library:
    """The chapter's ``source`` (a .cu file beside this one) as a native library."""
    return native.Library((HERE / source,), hopper_only=hopper_only)


def load(lib: native.Library, device: torch.device, signatures: dict[str, list]) -> ctypes.CDLL:
    """``lib`` built for ``device`` and loaded, each C function given its argument types."""
    handle = lib.load(device)
    for name, argtypes in signatures.items():
        getattr(handle, name).argtypes = argtypes
    return handle


def ptr(t: torch.Tensor) -> ctypes.c_void_p:
    """A tensor's first element's address, for a C function's pointer argument."""
    return ctypes.c_void_p(t.data_ptr())
