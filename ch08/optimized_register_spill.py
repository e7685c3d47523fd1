"""Optimized register spill (CUDA C++): the window indexed only with compile-time constants stays in registers.

Baseline (baseline_register_spill.py): ``ring[(r + j) % 32]`` with a runtime row counter: the array
goes to local memory, 31 LDL and 1 STL per output through L1.
Optimized: ``fir_shift`` (fir_spill.cu) runs the strip in steps of 32 rows with the 32 phases
unrolled (``#pragma unroll``): row r0 + p with r0 % 32 == 0 uses slot (p + j) % 32, a constant, so
the 32 values are 32 registers. The SASS has no LDL/STL (a CPU test checks it); the only memory
traffic left is the one global load and store per output. Each row is loaded 8 outputs before its
first use into a second register array (slot p % 8), so 6-8 loads a thread are always in flight,
across the loop's back edge too (ptxas alone kept ~55 FFMAs of lead and none at a step's start:
long_scoreboard); 72 registers, 7 blocks of 128 an SM; outputs and rows only this thread reads
are streamed (evict-first) so L2 keeps the 31-row halo that the strip above reads again.
Expect: measured, H200, 2026-11-29, with the 8-row lookahead, twice: 3.33x [3.32, 3.33] and 3.37x
(0.544 -> 0.164 and 0.1615 ms), 3.3 TB/s: 78-79% of HBM copy bandwidth (without it, 2026-11-28:
0.183 ms, 70%).
Why the lookahead (SASS sm_90; before it, Nsight Compute on an H200): DRAM 70%, L2 77%, FMA 44%,
issue 45%, long_scoreboard 13.9 at 58% occupancy: no unit full, warps waiting on loads. The 32
LDG.E (4 bytes) of each 32-row step sat among its 1,024 FFMAs at least 55 FFMAs before their use,
none issued for the step's last ~150 FFMAs, and 5 blocks of 256 made 3.1 waves (a last wave 10%
full); now every load is issued >= 200 FFMAs ahead and 4,096 blocks of 128 make 4.4 waves. Loads
stay 4-byte: a 16-byte load would give a thread 4 columns and 4 x 32 window registers.
Run: python ch08/optimized_register_spill.py  |  aisp bench run -t ch08:register_spill
"""

from __future__ import annotations

from baseline_register_spill import RingBufferFir

import aisp


class RegisterWindowFir(RingBufferFir):
    mode = 1


def get_benchmark() -> aisp.Benchmark:
    return RegisterWindowFir()


if __name__ == "__main__":
    aisp.main(get_benchmark)
