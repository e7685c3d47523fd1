"""Optimized flex decoding, graphed, with the keys split over more programs: ``SPLIT_KV`` set by hand.

Baseline (baseline_flexdecoding.py): SDPA with a dense additive mask over all 32,768 cache slots.
Optimized: ``optimized_flexdecoding_graph.py`` (the per-row window BlockMask and FlexAttention's
decoding kernel, replayed as one CUDA graph) with ``kernel_options={"SPLIT_KV": 32}``. FlexAttention
picks the split from the SM count, ``SMs // (batch x K/V heads) * 2``, at least 1: 132 // 256 * 2 = 0,
so 1 here, and each (row, K/V head) pair is one program of 2 warps walking its ~33 window blocks
(Nsight Compute, H200, 2026-11-28: the kernel 200 us at 58% of DRAM, 3.9 warps an SM, issue 12%:
too few loads in flight). With a full-block mask the kernel cuts each pair's block list into splits
of KV_LEN / SPLIT_KV keys (1,024 here: 8 blocks of 128), so a window's blocks go to ~4-5 programs
that read at once, and the pairs' partial results (32 x 32 x 32 x 128 fp32, 16 MB) are merged by
the kernel FlexAttention already runs after it. Splits past a window's blocks exit at once.
Expect (measured, H200, 2026-11-29): 1.397 -> 0.1948 ms, 7.18x [7.03, 7.33], 65.3% of HBM (2.76 TB/s), the pair's best;
``_graph`` 0.2245 ms (56.7%) the same run. Estimated 0.15-0.17 ms (the kernel 0.12-0.14 ms at 75-85% of DRAM);
Profiled (H200, 2026-11-29, aisp profile diff): the kernel 156.1 us at 76% of DRAM (3.64 TB/s; ``_graph``'s 200.8 us
at 58%), 8 warps an SM (203 registers: 4 programs of 2 warps), issue 19.5%, top stall long_scoreboard; then the merge
13.6 us; 186 us of kernels a call in the torch trace.
Run: python ch18/optimized_flexdecoding_split.py  |  aisp bench run -t ch18:flexdecoding
"""

from __future__ import annotations

from optimized_flexdecoding_graph import GraphedFlexDecode

import aisp

SPLIT_KV = 32
"""Programs a (row, K/V head) pair's keys are cut into: 1,024 keys (8 blocks) each, ~4-5 busy ones a window."""


class SplitFlexDecode(GraphedFlexDecode):
    kernel_options = {"SPLIT_KV": SPLIT_KV}


def get_benchmark() -> aisp.Benchmark:
    return SplitFlexDecode()


if __name__ == "__main__":
    aisp.main(get_benchmark)
