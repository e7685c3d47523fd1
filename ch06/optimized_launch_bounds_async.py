"""Optimized launch bounds, async variant (CUDA C++): the same __launch_bounds__(256, 8), 8 elements a
thread a step, and x staged into shared memory by cp.async two steps ahead.

Baseline (baseline_launch_bounds.py): ``horner_free`` keeps the 48 coefficients in registers: 64
per thread, 4 blocks of 256 per SM.
Optimized: ``horner_async`` (launch_bounds.cu). The pipelined kernel (optimized_launch_bounds_pipelined.py,
0.1624 ms, 78% of HBM copy) holds its next float4 in 4 of its 32 registers: one 16-byte load a thread,
32 KiB an SM, in flight, issued one step (~2.6 us) ahead. Here the loads hold no register: each thread
copies its next groups global -> shared with cp.async (LDGSTS.E.BYPASS.128) into a 3-stage ring of
its own slots (24 KiB a block, no barrier: a thread reads back only what it copied), two steps ahead:
64 bytes a thread, 128 KiB an SM, in flight. The registers this frees evaluate 8 elements a step
(two float4s, tiles of 512 float4 a block), so each broadcast LDS.128 of 4 coefficients feeds 32
FFMAs instead of 16. ptxas (nvcc 13.0, sm_90): 32 registers, no spill, 25.8 KiB shared a block; 8
blocks of 256 per SM fit the 228 KiB carveout horner_grid asks for. SASS per 8 elements: 419
instructions in the loop (376 FFMA, 14 LDS.128, 2 LDGSTS) against the pipelined loop's 427.
Same FMAs in the same order: bitwise the same answer as the baseline.
Expect: not yet measured. Estimate (arithmetic, not a measurement): issue 2% under the pipelined
kernel's (~105-119 us at 1.98-1.75 GHz), HBM 128 us; with 4x the bytes in flight, issued ~10 us
ahead instead of ~2.6, the DRAM wait should leave the warps' stalls, ~0.145-0.160 ms (80-88% of HBM copy); if issue and
HBM still add up as in the pipelined kernel, no gain (~0.162 ms).
Run: python ch06/optimized_launch_bounds_async.py  |  aisp bench run -t ch06:launch_bounds
"""

from __future__ import annotations

from baseline_launch_bounds import FreeRegistersPolynomial

import aisp


class AsyncPolynomial(FreeRegistersPolynomial):
    kernel = 4


def get_benchmark() -> aisp.Benchmark:
    return AsyncPolynomial()


if __name__ == "__main__":
    aisp.main(get_benchmark)
