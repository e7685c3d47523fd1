"""The cases a check runs: functions named ``MODULE:FUNCTION``, shape specs with named dims, random
draws and edge sizes, dtypes. Every bad input is a :class:`Usage` error (one line, exit 2)."""

from __future__ import annotations

import importlib
import importlib.util
import random
import re
import sys
from collections.abc import Callable
from pathlib import Path

import torch

DTYPES = {"float32": torch.float32, "fp32": torch.float32, "float16": torch.float16, "fp16": torch.float16,
          "bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float64": torch.float64, "fp64": torch.float64}
DIM = re.compile(r"^(?:[1-9]\d*|[A-Za-z_]\w*)$")
Spec = list[list[int | str]]
"""One call's input shapes; a dim is an integer or a name bound by ``dims``."""


class Usage(ValueError):
    """Bad input: reported on one line, exit 2."""


def load(target: str) -> Callable:
    """``module:function`` (a module name, found from the working directory too, or a .py file) ->
    the function."""
    module_name, sep, func = target.rpartition(":")
    if not sep or not module_name or not func:
        raise Usage(f"'{target}' is not MODULE:FUNCTION")
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            if not path.is_file():
                raise Usage(f"no file '{module_name}'")
            spec = importlib.util.spec_from_file_location(path.stem, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            if str(Path.cwd()) not in sys.path:
                sys.path.insert(0, str(Path.cwd()))
            module = importlib.import_module(module_name)
    except Usage:
        raise
    except Exception as exc:
        raise Usage(f"cannot import '{module_name}': {type(exc).__name__}: {exc}") from None
    fn = getattr(module, func, None)
    if not callable(fn):
        raise Usage(f"'{module_name}' has no function '{func}'")
    return fn


def parse_spec(spec: str, dims: dict[str, int]) -> Spec:
    """'MxK,KxN' -> [['M', 'K'], ['K', 'N']], names checked against ``dims``."""
    shapes = []
    for tensor in spec.split(","):
        parts = tensor.split("x")
        if not all(DIM.match(p) for p in parts):
            raise Usage(f"bad shape '{spec}': dims are positive integers or names joined by 'x', "
                        "tensors by ',' (e.g. 1024x1024 or MxK,KxN)")
        unbound = [p for p in parts if not p.isdigit() and p not in dims]
        if unbound:
            raise Usage(f"shape '{spec}' names {unbound[0]}, which --dims does not bind (e.g. --dims {unbound[0]}=512)")
        shapes.append([int(p) if p.isdigit() else p for p in parts])
    return shapes


def parse_dims(items: list[str]) -> dict[str, int]:
    """['M=512', 'K=256'] -> {'M': 512, 'K': 256}."""
    dims = {}
    for item in items:
        name, _, value = item.partition("=")
        if not re.match(r"^[A-Za-z_]\w*$", name) or not value.isdigit() or int(value) < 1:
            raise Usage(f"bad --dims entry '{item}': NAME=N with N a positive integer")
        dims[name] = int(value)
    return dims


def parse_dtypes(names: list[str] | tuple[str, ...]) -> list[torch.dtype]:
    unknown = [d for d in names if d not in DTYPES]
    if unknown:
        raise Usage(f"unknown dtype '{unknown[0]}' (known: {', '.join(DTYPES)})")
    return [DTYPES[d] for d in names]


def cases(specs: list[Spec], dims: dict[str, int], extra: int, rng: random.Random,
          edges: bool = False) -> list[list[tuple[int, ...]]]:
    """Concrete input shapes: each spec at its bound sizes; then, for a spec that names a dim, with
    ``edges`` every name at 1 and at its value + 1 (a tile's tail, a mask's edge), and ``extra``
    draws with each name in 1..its value (odd sizes that tuned sizes hide)."""
    out: list[list[tuple[int, ...]]] = []
    for spec in specs:
        named = any(isinstance(p, str) for shape in spec for p in shape)
        draws = [dims]
        if named and edges:
            draws += [{k: 1 for k in dims}, {k: v + 1 for k, v in dims.items()}]
        draws += [{k: rng.randint(1, v) for k, v in dims.items()} for _ in range(extra if named else 0)]
        for d in draws:
            shapes = [tuple(d[p] if isinstance(p, str) else p for p in shape) for shape in spec]
            if shapes not in out:
                out.append(shapes)
    return out
