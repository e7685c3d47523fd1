"""Importing a pair file and building its benchmark."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from aisp.benchmark import Benchmark


def load_benchmark(path: Path) -> Benchmark:
    """Import ``path`` as a top-level module (its folder on sys.path, so an optimized file can
    import its baseline by name) and return ``get_benchmark()``'s instance."""
    path = path.resolve()
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    module = importlib.import_module(path.stem)
    if Path(module.__file__ or "").resolve() != path:
        raise ImportError(f"{path.stem} resolves to {module.__file__}, not {path}: rename one of them")
    factory = getattr(module, "get_benchmark", None)
    if factory is None:
        raise AttributeError(f"{path} defines no get_benchmark()")
    bench = factory()
    if not isinstance(bench, Benchmark):
        raise TypeError(f"{path}: get_benchmark() returned {type(bench).__name__}, not an aisp.Benchmark")
    return bench
