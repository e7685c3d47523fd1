"""Shared by chapter 8's pairs: the CUDA C++ libraries, ctypes binding, inputs and torch references."""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from aisp.kits import native

HERE = Path(__file__).resolve().parent
BITWISE = {"element_tol": 0.0, "rtol": 0.0, "max_rel_l2": 0.0}
"""Zero tolerance, as precision "exact" gives, for bitwise-equal pairs declared ``fp32_simt``."""
PTR, INT, LONG, FLOAT = ctypes.c_void_p, ctypes.c_int, ctypes.c_long, ctypes.c_float


def library(source: str) -> native.Library:
    """One of this chapter's .cu files as a shared library (its local headers are tracked)."""
    return native.Library((HERE / source,))


def bind(lib: ctypes.CDLL, name: str, argtypes: Sequence[type]) -> Callable[..., int]:
    """The C entry point ``name`` of ``lib``, returning an int status."""
    fn = getattr(lib, name)
    fn.argtypes, fn.restype = list(argtypes), ctypes.c_int
    return fn


def call(fn: Callable[..., int], *args: object) -> None:
    """Call a C entry point; a RuntimeError when it returns a non-zero status."""
    native.check(fn(*args), fn.__name__)


def ints_out(fn: Callable[..., int], *args: object, count: int = 1) -> list[int]:
    """Call an entry point whose last ``count`` arguments are ``int*`` it fills in; those values."""
    values = [ctypes.c_int(0) for _ in range(count)]
    call(fn, *args, *(ctypes.byref(v) for v in values))
    return [v.value for v in values]


def int_out(fn: Callable[..., int], *args: object) -> int:
    """Call an entry point whose last argument is an ``int*`` it fills in; that value."""
    return ints_out(fn, *args)[0]


def unit_uniform(n: int, gen: torch.Generator, device: torch.device, dtype: torch.dtype = torch.float32
                 ) -> torch.Tensor:
    """n values uniform in [-1, 1): the domain of the chapter's polynomial."""
    return (torch.rand(n, generator=gen, device=device) * 2 - 1).to(dtype)


def series_coefs(terms: int) -> torch.Tensor:
    """The coefficients of ch08_poly.cuh, (-1)^k / (k + 1), rounded to fp32 as the kernels use them."""
    k = torch.arange(terms, dtype=torch.float64)
    return (torch.where(k % 2 == 1, -1.0, 1.0) / (k + 1)).float().double()


def series(x: torch.Tensor, terms: int) -> torch.Tensor:
    """P(clamp(x, -1, 1)) by Horner's rule in float64: the reference the kernels are checked against."""
    v, acc = x.double().clamp(-1, 1), torch.zeros(x.shape, dtype=torch.float64, device=x.device)
    for c in series_coefs(terms).tolist()[::-1]:
        acc = acc * v + c
    return acc
