"""Optimized compile modes, default: ``torch.compile(model)`` with Inductor's default settings.

Baseline (baseline_compile_modes.py): two eager decoder blocks, launch-bound.
Optimized: Dynamo traces the two blocks into one graph; Inductor fuses LayerNorm, residual
adds and GELU into a few Triton kernels, calls cuBLAS for the GEMMs and flash attention for
SDPA, and launches them from a generated Python wrapper: about half the kernels and a fraction
of eager's host time per call. Compile time is reported as ``compile_s``.
Expect: H200, measured: 1.04x [0.96, 1.12], 0.529 -> 0.515 ms: no gain at this size; compile 11.3 s.
Run: python ch14/optimized_compile_modes_default.py  |  aisp bench run -t ch14:compile_modes
"""

from __future__ import annotations

from baseline_compile_modes import EagerBlocks

import aisp


class CompiledDefault(EagerBlocks):
    mode = "default"


def get_benchmark() -> aisp.Benchmark:
    return CompiledDefault()


if __name__ == "__main__":
    aisp.main(get_benchmark)
