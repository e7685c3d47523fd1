"""aisp: verified baseline/optimized benchmark pairs, artifacts and system tools for NVIDIA GPUs."""

from aisp.benchmark import Benchmark, Requirements, Workload, default_device
from aisp.standalone import main, run_standalone

__all__ = ["Benchmark", "Requirements", "Workload", "default_device", "main", "run_standalone"]
__version__ = "0.1.0"
