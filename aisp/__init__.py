"""aisp: verified baseline/optimized benchmark pairs, artifacts and system tools for NVIDIA GPUs."""

from aisp.harness.benchmark import (
    Benchmark,
    LatencyCounts,
    Requirements,
    Unavailable,
    Workload,
    default_device,
)
from aisp.report.metrics_compare import compare_and_display_all_metrics
from aisp.standalone import main, run_standalone

__all__ = ["Benchmark", "LatencyCounts", "Requirements", "Unavailable", "Workload", "compare_and_display_all_metrics", "default_device", "main",
           "run_standalone"]
__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """``aisp.check`` imported on first use (``import aisp`` stays light): the callable package
    ``aisp.check(fn, ref, inputs=...)``."""
    if name == "check":
        import importlib

        return importlib.import_module("aisp.check")
    raise AttributeError(f"module 'aisp' has no attribute '{name}'")
