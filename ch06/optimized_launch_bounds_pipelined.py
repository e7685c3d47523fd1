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
Expect: measured, H200, 2026-11-29: 0.2634 -> 0.1624 ms, 1.61x [1.54, 1.69], 78% of HBM copy; the
fitted kernel 0.1712 ms in the same run (0.1643-0.1654 in earlier ones). The estimate was 0.143-0.158
ms (81-90%): hiding the DRAM wait gained ~2-5%, so issue (~107-121 us of FFMAs and LDS) and HBM
(128 us) still do not overlap fully. Profiled later (ncu, 2026-11-29): 159.6 us, DRAM 67.3%, SM 71.8%,
stalls not_selected 6.54 then long_scoreboard 3.74. The async variant (0.1493-0.1497 ms) beat it.
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
