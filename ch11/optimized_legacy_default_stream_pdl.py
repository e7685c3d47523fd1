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
Expect: measured, H200, 2026-11-29 (two runs, the plain FMA loop): 0.7659 and 0.7662 ms, 85.5% of
the pair's ceiling (one job's 32 x 10,000 dependent FMAs at fma_dependent's 2.05 ns = 0.655 ms),
2.20x [2.16, 2.24] and 2.18x [2.18, 2.19] over the baseline (1.684 / 1.671 ms); the non-blocking
fix read 0.844 / 0.8348 ms (77.6 / 78.5%) in the same runs: 23.9 us a step against 26.1-26.4, so
PDL hides ~2.3 us of each step's ~5 us outside its chain, and the pair passes 80%. An earlier run's
0.7535 ms (86.9%) was with a 64-a-trip FMA loop, reverted since: it made every other ch11 kernel
~10% slower. Estimated before (arithmetic): 0.72-0.75 ms, 87-91%, if PDL hid 2-3 us a step.
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
