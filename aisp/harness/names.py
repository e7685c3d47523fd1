"""The names a workload may give its link and precision, in a module without torch: the reports and
the CLI check them without importing the harness's torch-side modules (``aisp --help`` imports no torch)."""

from __future__ import annotations

from typing import Literal, get_args

Link = Literal["hbm", "h2d", "d2h", "nvlink", "host_memory", "page_cache", "page_faults"]
LINKS: tuple[str, ...] = get_args(Link)
"""The values of ``Workload.link``: each is priced by a figure of ``aisp peak``."""
Precision = Literal["fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "exact", "fp32_simt", "fp16_simt"]
PRECISIONS: tuple[str, ...] = get_args(Precision)
"""The values of ``Workload.precision`` (besides None)."""
