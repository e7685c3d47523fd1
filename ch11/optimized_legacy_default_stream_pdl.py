"""Optimized legacy default stream, PDL variant: the per-thread default stream, and each job's next
kernel launched while its current one runs (programmatic dependent launch, CUDA C++).

Baseline (baseline_legacy_default_stream.py): blocking worker streams take turns with the
application's kernels on the legacy default stream.
Optimized: ``legacy_run`` mode 3: the streams of optimized_legacy_default_stream_per_thread.py
(blocking workers, the application's kernels on ``cudaStreamPerThread``), so the three jobs overlap
as there; each kernel is launched with ``cudaLaunchAttributeProgrammaticStreamSerialization``. A job's
kernels still run one after another: kernel i + 1's blocks become resident and load their input
(which no kernel writes) while kernel i runs, then wait in ``griddepcontrol.wait`` until kernel i
has completed, and only then run their chain. What the fix of the lesson leaves per step, the
launch, the block placement and the load (~5 us of a 26 us step beside a ~21 us chain, measured
below), moves off each job's chain. Same kernels, same results; the kernels' FMA loops are unchanged.
Expect: not yet measured. Estimate (arithmetic, not a measurement): the pair's ceiling is one job's
32 x 10,000 dependent FMAs at 2.05 ns (fma_dependent, H200) = 0.655 ms; 80% of it is 0.819 ms,
25.6 us a step. Measured so far (H200): 0.839 ms (26.2 us a step: a 23.8 us kernel whose chain is
~20.3 us at fma_chain's ~4.02 cycles an FMA and 1.98 GHz, plus ~5 us of launch, placement, load,
store). If PDL hides 2-3 us of those 5 a step: 32 x (26.2 - 0.8 loop - 2..3) = 0.72-0.75 ms, 87-91%.
Run: python ch11/optimized_legacy_default_stream_pdl.py  |  aisp bench run -t ch11:legacy_default_stream
"""

from __future__ import annotations

from baseline_legacy_default_stream import BlockingWorkers

import aisp


class PerThreadDependentLaunch(BlockingWorkers):
    mode = 3


def get_benchmark() -> aisp.Benchmark:
    return PerThreadDependentLaunch()


if __name__ == "__main__":
    aisp.main(get_benchmark)
