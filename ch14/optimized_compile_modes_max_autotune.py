"""Optimized compile modes, max-autotune: GEMM choices benchmarked per shape, plus CUDA graphs.

Baseline (baseline_compile_modes.py): two eager decoder blocks, launch-bound.
Optimized: ``torch.compile(model, mode="max-autotune")``: for each of the four GEMM shapes of a
block (QKV, attention projection, MLP up and down) Inductor compiles and times cuBLAS and a set
of Triton templates and keeps the fastest (in-process, on the GPU, during setup()); pointwise
and reduction kernels are tuned too, and the result is replayed as a CUDA graph, as in
reduce-overhead. The two blocks share their four shapes, so tuning work does not grow with
depth; it is bounded by the shapes, which is why this small model keeps it to tens of seconds.
run() returns a copy of the graph's output buffer, as in reduce-overhead.
Expect: H200, measured: 1.64x [1.48, 1.81], 0.529 -> 0.335 ms, not above reduce-overhead
(1.77x) at this size (the GEMMs are a small part of the time); compile 20.2 s.
Run: python ch14/optimized_compile_modes_max_autotune.py  |  aisp bench run -t ch14:compile_modes
"""

from __future__ import annotations

from baseline_compile_modes import EagerBlocks

import aisp


class CompiledMaxAutotune(EagerBlocks):
    mode = "max-autotune"


def get_benchmark() -> aisp.Benchmark:
    return CompiledMaxAutotune()


if __name__ == "__main__":
    aisp.main(get_benchmark)
