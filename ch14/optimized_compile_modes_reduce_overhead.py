"""Optimized compile modes, reduce-overhead: Inductor's kernels replayed as one CUDA graph.

Baseline (baseline_compile_modes.py): two eager decoder blocks, launch-bound.
Optimized: ``torch.compile(model, mode="reduce-overhead")``: the default mode's kernels, recorded
into a CUDA graph (CUDA graph trees) on the first calls and replayed afterwards: one graph launch
per call (~1.2 us per node on the GPU, no per-kernel host work), inputs copied into the graph's
static buffers. The graph reuses its output buffer on the next replay, so run() returns a copy
(2 MiB, a few microseconds, counted in the timing).
Expect: H200, measured: 1.77x [1.65, 1.90], 0.529 -> 0.306 ms; compile 0.76 s, but warm: set
up after the default and max-autotune variants had compiled the same blocks in that process.
Run: python ch14/optimized_compile_modes_reduce_overhead.py  |  aisp bench run -t ch14:compile_modes
"""

from __future__ import annotations

from baseline_compile_modes import EagerBlocks

import aisp


class CompiledReduceOverhead(EagerBlocks):
    mode = "reduce-overhead"


def get_benchmark() -> aisp.Benchmark:
    return CompiledReduceOverhead()


if __name__ == "__main__":
    aisp.main(get_benchmark)
