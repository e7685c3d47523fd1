"""Command-line inputs of ``kernel_check.py``: the two functions, the shapes (with named dims and
random draws), the dtypes and options; every bad input is a :class:`Usage` error (one line, exit 2)."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import random
import re
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from aisp.harness.verify import TOLERANCES

DTYPES = {"float32": torch.float32, "fp32": torch.float32, "float16": torch.float16, "fp16": torch.float16,
          "bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float64": torch.float64, "fp64": torch.float64}
DIM = re.compile(r"^(?:[1-9]\d*|[A-Za-z_]\w*)$")


class Usage(Exception):
    """Bad input: reported on one line, exit 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line instead of argparse's usage block
        raise Usage(message)


def load(target: str) -> Callable:
    """``module:function`` (a module name or a .py file) -> the function."""
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


def parse_spec(spec: str, dims: dict[str, int]) -> list[list[int | str]]:
    """'MxK,KxN' -> [['M', 'K'], ['K', 'N']], names checked against ``dims``."""
    shapes = []
    for tensor in spec.split(","):
        parts = tensor.split("x")
        if not all(DIM.match(p) for p in parts):
            raise Usage(f"bad shape '{spec}' in --shapes: dims are positive integers or names joined by 'x', "
                        "tensors by ',' (e.g. 1024x1024 or MxK,KxN)")
        unbound = [p for p in parts if not p.isdigit() and p not in dims]
        if unbound:
            raise Usage(f"shape '{spec}' names {unbound[0]}, which --dims does not bind (e.g. --dims {unbound[0]}=512)")
        shapes.append([int(p) if p.isdigit() else p for p in parts])
    return shapes


def parse_dims(items: list[str]) -> dict[str, int]:
    dims = {}
    for item in items:
        name, _, value = item.partition("=")
        if not re.match(r"^[A-Za-z_]\w*$", name) or not value.isdigit() or int(value) < 1:
            raise Usage(f"bad --dims entry '{item}': NAME=N with N a positive integer")
        dims[name] = int(value)
    return dims


def cases(specs: list[list[list[int | str]]], dims: dict[str, int], extra: int, rng: random.Random) -> list[list[tuple]]:
    """Concrete input shapes: each spec at its bound sizes, then ``extra`` draws per spec that names a dim."""
    out = []
    for spec in specs:
        named = any(isinstance(p, str) for shape in spec for p in shape)
        draws = [dims] + [{k: rng.randint(1, v) for k, v in dims.items()} for _ in range(extra if named else 0)]
        out += [[tuple(d[p] if isinstance(p, str) else p for p in shape) for shape in spec] for d in draws]
    return out


def parse(argv: list[str]) -> argparse.Namespace:
    p = Parser(prog="kernel_check", description="Check a kernel against a reference, then time both.")
    p.add_argument("kernel")
    p.add_argument("--reference", required=True)
    p.add_argument("--shapes", nargs="+", required=True)
    p.add_argument("--dims", nargs="*", default=[])
    p.add_argument("--random", type=int, default=0)
    p.add_argument("--dtypes", nargs="+", default=["float32"])
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--precision", choices=sorted(TOLERANCES), default=None)
    p.add_argument("--element-tol", type=float, default=None)
    p.add_argument("--rtol", type=float, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--no-time", action="store_true")
    args = p.parse_args(argv)
    unknown = [d for d in args.dtypes if d not in DTYPES]
    if unknown:
        raise Usage(f"unknown dtype '{unknown[0]}' (known: {', '.join(DTYPES)})")
    if args.random < 0 or args.iterations < 2 or args.warmup < 0:
        raise Usage("--random and --warmup must be >= 0, --iterations >= 2")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise Usage("--device cuda, but torch sees no GPU")
    return args
