"""Optimized half2 math, tiles handed out at run time (CUDA C++): _ilp's packed chains, balanced warps.

Baseline (baseline_half2_math.py): fp16 data widened to fp32, two chains of 128 FFMAs per thread.
Optimized: the packed ``__hfma2`` Horner chains of optimized_half2_math_ilp.py (4 chains a thread
from one 16-byte vector, the next vector loaded before this one's 512 HFMA2), with the split of the
work changed. _ilp gives every warp of its persistent grid the same share (31 vectors a thread on an
H200); Nsight Compute counts only 61% achieved occupancy on that grid of whole waves, so warps
finish far apart: the scheduler favours some, which then idle their slots while the rest run on.
``poly_half2_dyn`` (half2_poly.cu) hands out tiles (32 vectors: one a lane) at run time: lane 0 of a
warp takes 4 tiles from a global counter with one atomic (65,536 that get tiles a call, and 2 a
warp that find none left), issued 4 passes before its answer is needed; a favoured warp takes more tiles and all warps end together. The last
warp to finish resets the counter. Same clamp and HFMA2s per element in the same order: the same
bits as ``poly_half2`` (GPU test).
Expect: not yet measured. Estimate (arithmetic, not a measurement): an issue model of one SM
sub-partition (16 warps, the loop's SASS, fixed work a warp vs tiles on demand) gives 0-6% over
_ilp's 0.1829-0.1851 ms, i.e. 0.173-0.185 ms, 75-81% of the 123.7 TFLOP/s fp16 SIMT ceiling
(80% is 0.1736 ms): a gain only if the scheduler is unfair, as the 61% occupancy suggests.
17.2 GFLOP, 256 MiB.
Run: python ch08/optimized_half2_math_dyn.py  |  aisp bench run -t ch08:half2_math
"""

from __future__ import annotations

from baseline_half2_math import Fp32MathOnHalf

import aisp


class Half2MathDyn(Fp32MathOnHalf):
    mode = 3
    """half2_poly.cu's poly_half2_dyn: 4 packed chains a thread, tiles taken from a global counter."""


def get_benchmark() -> aisp.Benchmark:
    return Half2MathDyn()


if __name__ == "__main__":
    aisp.main(get_benchmark)
