"""Optimized L2 persistence, the index loads issued ahead: one HBM round trip a thread instead of two.

Baseline (baseline_l2_persistence.py): random gathers from a 32 MiB table between 1 GiB of streamed
rows; under LRU the stream evicts table rows before their next use.
Optimized (optimized_l2_persistence_hints.py, the best measured: 0.3489 / 0.3496 ms, 76% of the HBM
copy): evict_first on x and out, so the table keeps the L2; still one float4 a thread, whose x load
ptxas issues after its idx load has returned (SASS: LDG idx, its use, LDG x, LDG table): two HBM
round trips in a row a thread, its warps waiting on loads (the 2026-11-28 profile of the same gather
under the window: long_scoreboard 113 warps per issue, L2 86% busy, DRAM 57%).
Optimized (this file): ``gather_add_ahead`` (l2_persistence.cu), the same hints, the idx use moved
behind the HBM loads. A warp takes 8 rows (1 KiB of x and of out); lane l takes rows 2 * (l / 8) and
2 * (l / 8) + 1, float4 l % 8 of each, and issues its two x float4s and its two indices (one 8-byte
load) back to back, then the two table rows, then the two stores: a thread waits one HBM round trip
and one L2 round trip for two float4s. x and idx load as ``ld.relaxed.gpu`` with the evict_first
policy (LDG.STRONG.GPU: ptxas keeps strong loads in program order; with the hints kernel's .nc loads
it put the second x load behind the idx use). Every x load and store still covers 4 whole lines a
warp; a warp's 8 indices are one 32-byte sector read once (two warps read each in gather_add_hints),
and idx, read once, is streamed too, so only the table loads at normal priority. 24 registers,
8 blocks of 256 an SM as before (the removed _ilp kernel kept 4 float4s a thread at 6 blocks an SM).
Same result (exact: one fp32 add per element).
Expect: not yet measured on a GPU. Estimate (arithmetic, not a measurement): twice the HBM bytes in
flight a resident thread, for a lifetime of one HBM plus one L2 round trip instead of two HBM round
trips; the floor is then the L2, which serves ~1.63 GB a call (x, out, 512 MiB of gathered rows,
idx): the baseline's profile had L2 94% busy over 344 us while also filling ~0.3 GB more from HBM
than declared: ~0.30-0.32 ms of L2 work at full busy for this kernel (an inference). 0.31-0.34 ms,
78-86% of the HBM copy's 0.2662 ms; at the slow end it misses the 80% (0.3328 ms) that issue #30 asks.
Run: python ch07/optimized_l2_persistence_ahead.py  |  aisp bench run -t ch07:l2_persistence
"""

from __future__ import annotations

from baseline_l2_persistence import LIBRARY, SIGNATURES, StreamedGather

import aisp


class AheadGather(StreamedGather):
    kernel = "gather_add_ahead_run"

    def prepare(self) -> None:
        """The library again, with the argument types of this kernel's launcher (gather_add_run's)."""
        self.lib = LIBRARY.load(self.device, {**SIGNATURES, self.kernel: SIGNATURES["gather_add_run"]})


def get_benchmark() -> aisp.Benchmark:
    return AheadGather()


if __name__ == "__main__":
    aisp.main(get_benchmark)
