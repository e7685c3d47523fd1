"""Optimized vectorized ops, one-wave variant (CUDA C++): the native kernel with every block in one wave.

Baseline (baseline_vectorized_ops.py): 2,048 ``torch.addcmul`` calls, one per row of a 2,048 x
131,072 fp32 matrix: 2,048 launches of 512 KiB of work each, bound by the host.
Optimized: the native variant's ``affine_rows`` kernel (vectorized_ops.cu), unchanged, launched with
the row groups rounded down instead of up. The native variant asks for enough blocks to fill every
SM (8 x 132 = 1,056 resident) and rounds up to whole row groups: 128 column slices x 9 groups =
1,152 blocks of ~228 rows each, so 96 blocks (8% of the 2 GiB) start only when the first 1,056 end
and stream their rows with 9% of the GPU's places occupied. Here 128 x 8 = 1,024 blocks of 256 rows
each all start at once (7-8 a SM) and end together: the same bytes, no second wave.
Same kernel, same answer (bitwise torch.addcmul, as the native variant).
Expect: measured, H200, 2026-11-29 (two runs): 0.5881 and 0.5749 ms, 3.65 and 3.74 TB/s, 86.5% and
88.5% of the 4.22 TB/s HBM copy ceiling, 51.9x [50.3, 53.4] and 44.7x [35.1, 56.9] over the baseline;
the native variant read 0.6521 / 0.6398 ms (78.0 / 79.5%) in the same runs, so one wave saves 0.06 ms
(10%) and the pair passes 80%. The tail wave was what held it: the estimate's mechanism, confirmed by
the times (not profiled). Estimated before: 0.56-0.60 ms, 85-90%, if the 96-block tail wave (0.18 GB
at 1.5-2 TB/s, ~90-120 us) was what held the native kernel's DRAM at 74%.
The earlier 4-row kernel (6 blocks a SM: 7 x 128 = 896 blocks for 792 places, again a tail wave)
timed the same as the 2-row one, which this reading also explains.
Needs a GPU: skips on a CPU.
Run: python ch06/optimized_vectorized_ops_wave.py  |  aisp bench run -t ch06:vectorized_ops
"""

from __future__ import annotations

from optimized_vectorized_ops_native import NativeAffine

import aisp

AFFINE_THREADS = 256
"""Threads (float4 columns) per block of affine_rows: kAffineThreads in vectorized_ops.cu."""


def whole_wave_groups(resident: int, rows: int, cols: int) -> int:
    """Row groups so that column slices x groups blocks all fit the ``resident`` blocks the GPU holds at
    once (rounded down; at least 1, at most ``rows``); -1 when ``resident`` is an error (<= 0)."""
    if resident <= 0:
        return -1
    slices = -(-(cols // 4) // AFFINE_THREADS)
    return max(1, min(rows, resident // slices))


class WaveAffine(NativeAffine):
    """affine_rows over a grid of at most one wave."""

    def row_groups(self) -> int:
        return whole_wave_groups(self.lib.affine_rows_resident(), self.workload.rows, self.workload.cols)


def get_benchmark() -> aisp.Benchmark:
    return WaveAffine()


if __name__ == "__main__":
    aisp.main(get_benchmark)
