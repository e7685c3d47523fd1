"""Optimized prefill/decode priority, whole variant: priority streams, the prefill issued whole at arrival.

Baseline (baseline_prefill_decode_priority.py): the whole 32,768-token prefill on the decode steps' stream.
Optimized: decode on the high-priority stream, the unchunked prefill on the low-priority one. The
decode steps no longer queue behind the prefill, but its kernels are long (a causal attention over
32,768 queries; GEMMs of 32,768 rows) and fill the GPU with blocks, and the host spends the whole
prefill's launches before issuing the next decode step. Its gap against the main variant's shows
what chunking adds on top of priority.
Expect (measured, H200, 2026-11-27): p99 gap 40.67 -> 8.59 ms, 4.73x; the call 146.1 -> 114.7 ms.
Earlier (2026-11-26): p99 gap 42.1 -> 13.85 ms, 3.04x (estimated 6-12 ms, 2.5-5x);
the call gets faster, 155.5 -> 123.7 ms. Profiled (torch profiler, H200, 2026-11-29): the same kernels as
the baseline (87.2 vs 85.5 ms, 5,924 launches each), so the faster call is likely the two streams
overlapping them (not traced; under the profiler the windows are host-bound, 291.1 vs 242.0 ms).
Run: python ch17/optimized_prefill_decode_priority_whole.py  |  aisp bench run -t ch17:prefill_decode_priority
"""

from __future__ import annotations

from optimized_prefill_decode_priority import PriorityStreams

import aisp


class WholeOnLowPriority(PriorityStreams):
    chunked = False


def get_benchmark() -> aisp.Benchmark:
    return WholeOnLowPriority()


if __name__ == "__main__":
    aisp.main(get_benchmark)
