"""Small helpers shared by chapter 7's CUDA C++ pairs (not a pair itself)."""

from __future__ import annotations

import ctypes
from pathlib import Path

from aisp.kits import native

HERE = Path(__file__).resolve().parent
PTR, INT, LONG, FLOAT, SIZE = ctypes.c_void_p, ctypes.c_int, ctypes.c_long, ctypes.c_float, ctypes.c_size_t


def library(source: str, *, hopper_only: bool | None = None) -> native.Library:
    """The chapter's ``source`` (a .cu file beside this one) as a native library."""
    return native.Library((HERE / source,), hopper_only=hopper_only)


