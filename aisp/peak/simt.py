"""SIMT FMA ceilings: the rate of fp32 FFMA and packed fp16 HFMA2 on the CUDA cores (not the tensor cores).

A kernel whose FLOPs are elementwise math or FMA chains (a polynomial per element, a CUDA-core GEMM
lesson) can never run at the tensor-core matmul peak; its compute ceiling is this one. Each probe
launches ``simt_fma.cu`` (built by :mod:`aisp.kits.native`): every thread runs 16 independent FMA
chains on operands held in registers, enough blocks for every SM several times over, and writes the
sum of its chains so the compiler keeps the work. An FFMA is 2 FLOP, an HFMA2 4 (two fp16 FMAs).
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import torch

from aisp.kits import native
from aisp.peak.probes import PeakConfig, gpu_library, measurement, median_ms

LIBRARY = native.Library((Path(__file__).with_name("simt_fma.cu"),))
FMAS = {"simt_fp32": (0, "FFMA", 2), "simt_fp16": (1, "HFMA2", 4)}
"""Probe name -> (kind argument of ``simt_fma_run``, the SASS instruction, FLOP per instruction)."""
BLOCKS_PER_SM = 8
"""Blocks of ``simt_threads()`` (256) threads per SM: 2,048 threads, a full Hopper SM, every SM alike."""
STEPS = 8192
"""FMAs of each chain per launch: ~1 ms of work on an H200, far above the launch cost."""
SIGNATURES = {"simt_fma_run": [ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_float,
                               ctypes.c_float, ctypes.c_void_p]}


def fma_rate(name: str, cfg: PeakConfig, device: torch.device) -> dict[str, Any]:
    """The SIMT FMA rate ``name`` (a key of :data:`FMAS`) in TFLOP/s; :class:`ProbeSkipped` without
    a GPU or nvcc."""
    kind, op, flop = FMAS[name]
    lib = gpu_library(device, LIBRARY, SIGNATURES, "the SIMT FMA rate (CUDA cores)")
    lib.simt_fma_instructions.argtypes, lib.simt_fma_instructions.restype = [ctypes.c_int] * 2, ctypes.c_longlong
    blocks = torch.cuda.get_device_properties(device).multi_processor_count * BLOCKS_PER_SM
    threads = lib.simt_threads()
    out = torch.empty(blocks * threads, dtype=torch.float32, device=device)  # a float or a __half2 a thread
    stream = native.stream(device)

    def launch() -> None:
        native.check(lib.simt_fma_run(kind, native.ptr(out), blocks, STEPS, 0.999, 0.001, stream), "simt_fma_run")

    ms = median_ms(launch, device, cfg.repeats)
    instructions = lib.simt_fma_instructions(blocks, STEPS)
    detail = (f"{op} ({flop} FLOP each): {blocks} blocks x {threads} threads x 16 independent chains x {STEPS} steps, "
              f"operands in registers (simt_fma.cu), median of {cfg.repeats}")
    return measurement(instructions * flop / (ms * 1e-3) / 1e12, "TFLOP/s", detail)
