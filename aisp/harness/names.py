"""The names a workload may give its link and precision (and how the harness counts a peak), in a module without torch: the reports and
the CLI check them without importing the harness's torch-side modules (``aisp --help`` imports no torch)."""

from __future__ import annotations

from typing import Literal, get_args

Link = Literal["hbm", "l2", "h2d", "d2h", "nvlink", "nvlink_one_way", "host_memory", "page_cache", "page_faults"]
LINKS: tuple[str, ...] = get_args(Link)
"""The values of ``Workload.link``: each is priced by a figure of ``aisp peak``."""
HOST_LINKS = frozenset({"host_memory", "page_cache", "page_faults"})
"""Links of the host, not of a GPU (:mod:`aisp.peak.host`): the host's memory copy rate (read and write
counted, on all of torch's threads), its page-cache read rate (one thread) and the first-touch rate of
fresh memory (one thread)."""
HOST_RATE_LINKS = HOST_LINKS | {"h2d", "d2h"}
"""Links whose rate the host sets (its memory, PCIe root and kernel): a pair over one moves with the host,
whatever interleaving cancels. ch01:pinned_memory's pageable-copy baseline read 13.8-21.4 ms on H200
leases (the CPU copies each chunk into a staging buffer) while its pinned copy held ~2.43 ms: on the
2 x H200 host of 2026-11-29 the speedup read 6.7x against 8.4x stored, a false regression under the
ratio prior."""
Precision = Literal["fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "exact", "fp32_simt", "fp16_simt"]
PRECISIONS: tuple[str, ...] = get_args(Precision)
"""The values of ``Workload.precision`` (besides None)."""
PEAK_METHOD = "setup+carried+call"
"""How the harness counts ``memory.peak_bytes`` (stored beside it as ``peak_method``): the setup's bytes,
the state earlier calls left on the benchmark (``carried_bytes``: gradients, optimizer moments, buffers
made on a first call) and the call's rise over what was allocated before it. Before 2026-11-29 (no
method stored) the carried state was left out, so a call that frees it before allocating anew
(``zero_grad(set_to_none=True)``) read low by its size."""
