"""Optimized launch bounds, fitted variant (CUDA C++): __launch_bounds__(256, 8) on a working set
that fits 32 registers, so nothing spills.

Baseline (baseline_launch_bounds.py): ``horner_free`` keeps the 48 coefficients in registers: 64
per thread, 4 blocks of 256 per SM. optimized_launch_bounds.py asks for 8 blocks with the same
code: ptxas caps it at 32 registers and spills (ptxas -v: 32-byte stack, 36 bytes of spill stores,
64 of spill loads; ncu: 11.6M local requests, DRAM 49%, FMA pipe 43%, no unit full).
Optimized: ``horner_fitted`` (launch_bounds.cu), the same bound with a working set that fits: the
coefficients, the same for every thread, staged once per block in shared memory and read in the
loop as 12 broadcast LDS.128 (one wavefront each, 1 per 16 FMAs), and 4 elements per thread (one
LDG.128 and one STG.128). ptxas -v: 30 registers, 0 bytes spill, 8 blocks of 256 per SM (2,048
threads, 32 KiB of loads in flight per SM). Same FMAs in the same order: bitwise the same answer.
Expect (measured, H200, 2026-11-29): 0.2572 -> 0.1654 and 0.1643 ms (two runs), 1.56x [1.55, 1.58];
77% of HBM copy (the bounded kernel 0.227 ms, 56%). Nsight Compute: 161.5 us, SM 70%, DRAM 67%
(3.21 TB/s), top stalls long_scoreboard 7.3 then not_selected 5.4: the FMAs (47 an element, ~94 us
at the FMA peak) and HBM (128 us) share the time; the estimate before the run was 135-165 us.
Run: python ch06/optimized_launch_bounds_fitted.py  |  aisp bench run -t ch06:launch_bounds
"""

from __future__ import annotations

from baseline_launch_bounds import FreeRegistersPolynomial

import aisp


class FittedPolynomial(FreeRegistersPolynomial):
    kernel = 2


def get_benchmark() -> aisp.Benchmark:
    return FittedPolynomial()


if __name__ == "__main__":
    aisp.main(get_benchmark)
