"""aisp: verified baseline/optimized benchmark pairs, artifacts and system tools for NVIDIA GPUs.

The names below (``aisp.Benchmark``, ``aisp.Workload``, ...) are imported on first use through the
module's ``__getattr__``: they bring in torch, and ``aisp --help`` (which imports this package) must
not pay torch's import time. ``from aisp import Benchmark`` works as before.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

LAZY = {
    "Benchmark": "aisp.harness.benchmark",
    "LatencyCounts": "aisp.harness.benchmark",
    "Requirements": "aisp.harness.benchmark",
    "Unavailable": "aisp.harness.benchmark",
    "Workload": "aisp.harness.benchmark",
    "default_device": "aisp.harness.benchmark",
    "compare_and_display_all_metrics": "aisp.report.metrics_compare",
    "main": "aisp.standalone",
    "run_standalone": "aisp.standalone",
}
"""Exported name -> the module that defines it, imported when the name is first asked for."""

__all__ = sorted(LAZY)


def __getattr__(name: str) -> object:
    """An exported name, imported from its module on first use; ``aisp.check`` is the callable
    package ``aisp.check(fn, ref, inputs=...)``."""
    if name == "check":
        return importlib.import_module("aisp.check")
    if name in LAZY:
        value = getattr(importlib.import_module(LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'aisp' has no attribute '{name}'")


def __dir__() -> list[str]:
    return sorted([*globals(), *LAZY])
