"""Optimized L2 persistence, eviction hints per access: the stream goes first out of L2, no context state.

Baseline (baseline_l2_persistence.py): random gathers from a 32 MiB table between 1 GiB of streamed
rows; under LRU the stream evicts table rows before their next use. Run alone it read 0.3753 ms
(H200, 2026-11-29), and Nsight Compute read its kernel at 344 us moving ~1.44 GB from DRAM at 87%
of its peak: ~0.32 GB more than the 1.12 GB declared, table rows gathered again from HBM.
Optimized (optimized_l2_persistence.py): a persisting set-aside and an access-policy window, a limit
of the CUDA context that the harness puts back before each call, so that variant sets it per call.
Optimized (this file): ``gather_add_hints`` (l2_persistence.cu), the same gather with a cache policy
on each access instead: x loaded (``ld.global.nc.L1::no_allocate.L2::cache_hint``) and out stored
(``st.global.L1::no_allocate.L2::cache_hint``) under ``createpolicy.fractional.L2::evict_first``
(sm_80+), idx and the table rows at normal priority. When L2 must evict, the streamed lines go first,
so table rows stay for their next use, with no set-aside, no stream attribute, nothing left set
after the call but lines first in line for eviction. Not evict_last on the table: where it takes
effect, 32 MiB of lines would outrank every other variant's data after the call. Same kernel shape
(one float4 of x, table, out per thread, 19 registers), same result (exact: one fp32 add).
Expect: not yet measured. Estimate (arithmetic, not a measurement): if the table stays resident,
DRAM moves the 1.12 GB declared (0.268 ms at the baseline's 4.2 TB/s) while L2 serves ~1.63 GB of
requests (0.311 ms at the measured l2_bandwidth, 5.23 TB/s): ~0.31-0.34 ms, 1.1-1.2x over the
baseline alone, 78-85% of the HBM copy. The window variant also kept the table in L2 and stayed
L2-bound at 0.405-0.417 ms, so a result near the baseline's 0.375 ms is as possible.
Run: python ch07/optimized_l2_persistence_hints.py  |  aisp bench run -t ch07:l2_persistence
"""

from __future__ import annotations

from baseline_l2_persistence import StreamedGather

import aisp


class HintedGather(StreamedGather):
    kernel = "gather_add_hints_run"


def get_benchmark() -> aisp.Benchmark:
    return HintedGather()


if __name__ == "__main__":
    aisp.main(get_benchmark)
