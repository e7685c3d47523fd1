"""Optimized compile modes, reduce-overhead: Inductor's kernels replayed as one CUDA graph.

Baseline (baseline_compile_modes.py): two eager decoder blocks, launch-bound.
Optimized: ``torch.compile(model, mode="reduce-overhead")``: the default mode's kernels, recorded
into a CUDA graph (CUDA graph trees) on the first calls and replayed afterwards: one graph launch
per call (~1.2 us per node on the GPU, no per-kernel host work), inputs copied into the graph's
static buffers. The graph reuses its output buffer on the next replay, so run() returns a copy
(2 MiB, a few microseconds, counted in the timing).
Expect: 2.5-4x on an H100/H200, near the GPU time of the kernels themselves; compile 10-40 s
(estimate, not yet measured).
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
