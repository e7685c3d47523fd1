"""Optimized launch bounds (CUDA C++): the same polynomial kernel capped at 32 registers.

Baseline (baseline_launch_bounds.py): ``horner_free`` holds its 48 coefficients in 64 registers
per thread: 4 blocks of 256 per SM, 50% occupancy.
Optimized: ``__launch_bounds__(256, 8) horner_bounded`` (launch_bounds.cu): the promise of at
most 256 threads per block and the wish for 8 resident blocks per SM make ptxas fit the kernel in
65,536 / 2,048 = 32 registers; the coefficients it cannot keep go to local memory (32 bytes per
thread, hits in L1). Twice the warps per SM hide the load latency and the 47-step FMA chain.
Same arithmetic in the same order: bitwise the same answer. (Asking for too many blocks would
spill the loop's working set and lose; check ptxas -v or cuobjdump -res-usage.)
Expect: measured on an H200: 0.240 ms, 1.13x [1.12, 1.13]; 26.3 TFLOP/s, 2,238 GB/s (53% of
the HBM copy ceiling). Not a memory-bound kernel: 94 FLOPs per 8 bytes (11.75 FLOP/B) is at the
fp32 ridge. HBM alone takes >= 128 us (512 MiB at 4.2 TB/s); issue alone ~120 us (SASS: 141
FFMA, 16 LDL, 9 STL per 3 elements, ~60 instructions per element at 4 per cycle per SM, ~1.98
GHz). The measured 240 us is about their sum (not profiled): bound by both, not by HBM.
Run: python ch06/optimized_launch_bounds.py  |  aisp bench run -t ch06:launch_bounds
"""

from __future__ import annotations

from baseline_launch_bounds import FreeRegistersPolynomial

import aisp


class BoundedPolynomial(FreeRegistersPolynomial):
    kernel = 1


def get_benchmark() -> aisp.Benchmark:
    return BoundedPolynomial()


if __name__ == "__main__":
    aisp.main(get_benchmark)
