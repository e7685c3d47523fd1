"""Optimized prefill/decode priority, chunked variant: 2,048-token chunks interleaved on the one shared stream.

Baseline (baseline_prefill_decode_priority.py): the whole 32,768-token prefill on the decode steps' stream.
Optimized: no second stream and no priority; from the arrival on, each decode step is issued right
after one prefill chunk on the same stream, so a gap between decode steps holds one chunk (~1/16
of the prefill plus the growth of attention over earlier chunks) instead of the whole prefill. Its
gap against the main variant's shows what priority streams add on top of chunking.
Expect (measured, H200, 2026-11-27): p99 gap 40.67 -> 12.67 ms, 3.21x; call 146.1 -> 166.2 ms.
Earlier (2026-11-26): p99 gap 42.1 -> 13.41 ms, 3.14x (estimated 8-12 ms, 2.5-4x), the
best variant; call time grows 155.5 -> 193.6 ms (+24%, estimated within ~10%).
Run: python ch17/optimized_prefill_decode_priority_chunked.py  |  aisp bench run -t ch17:prefill_decode_priority
"""

from __future__ import annotations

from optimized_prefill_decode_priority import PriorityStreams

import aisp


class ChunkedOneStream(PriorityStreams):
    prioritized = False


def get_benchmark() -> aisp.Benchmark:
    return ChunkedOneStream()


if __name__ == "__main__":
    aisp.main(get_benchmark)
