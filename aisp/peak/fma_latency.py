"""Dependent-FMA floor: one fp32 FMA that must wait for the one before it (``fma_dependent``).

A kernel whose threads each run a chain of dependent FMAs (``ch11``'s ``fma_chain``: v <- 0.9999 v +
1e-4, 20,000 times) cannot finish before its longest chain has, one FMA after another, however idle the
other SMs are; the SIMT FMA rate (:mod:`aisp.peak.simt`) prices independent FMAs, not this. Here one
warp runs one long chain (``fma_latency.cu``): :data:`CHAIN` dependent FFMAs, timed with CUDA events,
less the time of the same launch with an empty chain (the launch, the start and the write), divided by
the FMAs. A latency figure in µs per FMA (~2 ns: 4 SM cycles at the H200's 1.98 GHz boost clock), the
floor a workload's ``dependent_fmas`` are priced at.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import torch

from aisp.kits import native
from aisp.peak.latency import figure
from aisp.peak.probes import gpu_library, median_ms

LIBRARY = native.Library((Path(__file__).with_name("fma_latency.cu"),))
CHAIN = 1 << 20
"""Dependent FFMAs of the timed chain: ~2 ms at 4 cycles each on an H200, far above the launch."""
SIGNATURES = {"fma_dependent_run": [ctypes.c_void_p, ctypes.c_int, ctypes.c_float, ctypes.c_float, ctypes.c_void_p]}


def per_fma_us(chain_ms: float, empty_ms: float, fmas: int) -> float:
    """µs per dependent FMA: a chain of ``fmas`` took ``chain_ms``, the same launch with none ``empty_ms``
    (its launch and fixed cost, taken out)."""
    if fmas <= 0 or chain_ms <= empty_ms:
        raise ValueError(f"a chain of {fmas} FMAs in {chain_ms} ms, an empty one in {empty_ms} ms: no time per FMA")
    return (chain_ms - empty_ms) * 1e3 / fmas


def cycles(us: float, sm_clock_mhz: float) -> float:
    """SM clock cycles in ``us`` microseconds at ``sm_clock_mhz``."""
    return us * sm_clock_mhz


def sm_clock_mhz(device: torch.device) -> float | None:
    """The GPU's current SM clock (NVML, through torch), or None where it cannot be read."""
    try:
        return float(torch.cuda.clock_rate(device))
    except Exception:  # noqa: BLE001 - pynvml missing or NVML unavailable: the figure stands without it
        return None


def fma_dependent(device: torch.device, repeats: int) -> dict[str, Any]:
    """``fma_dependent``: µs per dependent fp32 FMA of one warp's chain of :data:`CHAIN` (the median of
    ``repeats`` launches, less an empty chain's); :class:`ProbeSkipped` without a GPU or nvcc."""
    lib = gpu_library(device, LIBRARY, SIGNATURES, "the dependent-FMA latency")
    unroll, threads = lib.fma_dependent_unroll(), lib.fma_dependent_threads()
    rounds = CHAIN // unroll
    with torch.cuda.device(device):
        out = torch.empty(threads, dtype=torch.float32, device=device)
        stream = native.stream(device)

        def chain(n: int) -> Any:
            return lambda: native.check(lib.fma_dependent_run(native.ptr(out), n, 0.9999, 1e-4, stream),
                                        "fma_dependent_run")

        empty_ms = median_ms(chain(0), device, repeats)
        chain_ms = median_ms(chain(rounds), device, repeats)
        clock = sm_clock_mhz(device)  # right after the chain: the clock it ran at
    us = per_fma_us(chain_ms, empty_ms, rounds * unroll)
    at_clock = "" if clock is None else f", {cycles(us, clock):.2f} cycles at the SM clock then ({clock:.0f} MHz)"
    return figure(us, f"one warp, a chain of {rounds * unroll:,} dependent FFMAs (fma_latency.cu) in {chain_ms:.3f} ms "
                      f"less an empty chain's {empty_ms * 1e3:.1f} us (launch and write), median of {repeats}: "
                      f"{us * 1e3:.3f} ns per FMA{at_clock}")
