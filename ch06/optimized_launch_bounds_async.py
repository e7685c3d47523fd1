"""Optimized launch bounds, async variant (CUDA C++): the same __launch_bounds__(256, 8), 8 elements a
thread a step, and x staged into shared memory by cp.async two steps ahead.

Baseline (baseline_launch_bounds.py): ``horner_free`` keeps the 48 coefficients in registers: 64
per thread, 4 blocks of 256 per SM.
Optimized: ``horner_async`` (launch_bounds.cu). The pipelined kernel (optimized_launch_bounds_pipelined.py,
0.1604-0.1624 ms, 78-79% of HBM copy) holds its next float4 in 4 of its 32 registers: one 16-byte load a thread,
32 KiB an SM, in flight, issued one step (~2.6 us) ahead. Here the loads hold no register: each thread
copies its next groups global -> shared with cp.async (LDGSTS.E.BYPASS.128) into a 3-stage ring of
its own slots (24 KiB a block, no barrier: a thread reads back only what it copied), two steps ahead:
64 bytes a thread, 128 KiB an SM, in flight. The registers this frees evaluate 8 elements a step
(two float4s, tiles of 512 float4 a block), so each broadcast LDS.128 of 4 coefficients feeds 32
FFMAs instead of 16. ptxas (nvcc 13.0, sm_90): 32 registers, no spill, 25.8 KiB shared a block; 8
blocks of 256 per SM fit the 228 KiB carveout horner_grid asks for. SASS per 8 elements: 419
instructions in the loop (376 FFMA, 14 LDS.128, 2 LDGSTS) against the pipelined loop's 427.
Same FMAs in the same order: bitwise the same answer as the baseline.
Expect: measured, H200, 2026-11-29: 0.2570 -> 0.1493 ms, 1.76x [1.57, 1.98], and 0.2564 -> 0.1497 ms,
1.70x [1.63, 1.78]; 85.2% / 84.9% of HBM copy; the pipelined kernel 0.1621 / 0.1604 ms in the same
runs, so 7-8% faster, inside the 0.145-0.160 ms estimated. Nsight Compute: horner_async 144.6 us at
DRAM 74.1% (3,566 GB/s), L2 86%, SM 79.3%, occupancy 79.9%, top stall not_selected 9.19 (then
short_scoreboard 2.85): the DRAM wait has left the warps' stalls (the pipelined kernel: 159.6 us,
DRAM 67.3%).
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
