"""Optimized launch bounds, pipelined variant (CUDA C++): the fitted kernel with the next float4's
load issued before the current one's FMAs, so loads stay in flight while the warps compute.

Baseline (baseline_launch_bounds.py): ``horner_free`` keeps the 48 coefficients in registers: 64
per thread, 4 blocks of 256 per SM.
Optimized: ``horner_pipelined`` (launch_bounds.cu): ``horner_fitted``'s working set (coefficients
in shared memory, read as 12 broadcast LDS.128; 4 elements a thread from one LDG.128; 8 blocks of
256 per SM), software-pipelined. horner_fitted (optimized_launch_bounds_fitted.py) loads a float4
and then spends 188 FFMAs on it with no load of its own in flight; Nsight Compute shows its warps
waiting on DRAM most (long_scoreboard 7.3, the top stall) at DRAM 67% and SM 70%. Here each
thread's loop issues the LDG.128 of its next group first, then the 188 FFMAs and the store of this
one: the load has the whole FMA block (~3,500 cycles with 16 warps a scheduler) to land, against
~1,000-2,000 cycles of loaded DRAM latency. The load is ``ld.volatile`` so that ptxas keeps it
ahead of the (volatile) shared reads: a plain one it sinks to the middle of the FMA block under the
32-register cap. Unrolled by 2 (no register copies). ptxas -v: 32 registers, 0 bytes spill, 8
blocks per SM. Same FMAs in the same order: bitwise the same answer as the baseline.
Expect: not yet measured. Estimate (arithmetic, not a measurement): HBM, 512 MiB at 4.2 TB/s:
128 us; issue, 524,288 warp-groups of ~213 instructions (188 FFMA) over 528 schedulers: 211k
cycles, 107 us at 1.98 GHz, 121 us at 1.75 GHz (the fitted kernel has the same count). With the
DRAM wait hidden the two overlap to ~140-155 us: 0.143-0.158 ms a call, 81-90% of HBM copy,
against the fitted kernel's 0.1643-0.1654 ms (77%).
Run: python ch06/optimized_launch_bounds_pipelined.py  |  aisp bench run -t ch06:launch_bounds
"""

from __future__ import annotations

from baseline_launch_bounds import FreeRegistersPolynomial

import aisp


class PipelinedPolynomial(FreeRegistersPolynomial):
    kernel = 3


def get_benchmark() -> aisp.Benchmark:
    return PipelinedPolynomial()


if __name__ == "__main__":
    aisp.main(get_benchmark)
