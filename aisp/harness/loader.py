"""Importing a pair file and building its benchmark."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

from aisp.harness.benchmark import Benchmark
from aisp.harness.phases import phase


def import_module_at(path: Path) -> ModuleType:
    """Import ``path`` as a top-level module with its folder first on sys.path, so an optimized
    file imports its own chapter's baseline by name.

    Chapters reuse file names (``baseline_gemm.py`` in ch01 and ch03): a module of the same name
    already imported from another folder, and any other module that a file of this folder would
    shadow, is dropped from ``sys.modules`` first, so one process can load pairs of several
    chapters in turn.
    """
    path = path.resolve()
    folder = path.parent
    if str(folder) in sys.path:
        sys.path.remove(str(folder))
    sys.path.insert(0, str(folder))
    own = {file.stem for file in folder.glob("*.py")}
    for name, module in list(sys.modules.items()):
        origin = getattr(module, "__file__", None)
        if origin and name in own and Path(origin).resolve().parent != folder:
            del sys.modules[name]
    module = importlib.import_module(path.stem)
    if Path(module.__file__ or "").resolve() != path:
        raise ImportError(f"{path.stem} resolves to {module.__file__}, not {path}: rename one of them")
    return module


def load_benchmark(path: Path) -> Benchmark:
    """Import the pair file at ``path`` and return ``get_benchmark()``'s instance."""
    with phase("import"):
        module = import_module_at(path)
    factory = getattr(module, "get_benchmark", None)
    if factory is None:
        raise AttributeError(f"{path} defines no get_benchmark()")
    bench = factory()
    if not isinstance(bench, Benchmark):
        raise TypeError(f"{path}: get_benchmark() returned {type(bench).__name__}, not an aisp.Benchmark")
    return bench
