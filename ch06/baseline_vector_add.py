"""Baseline vector add (CUDA C++): c = a + b over 128M floats with a single block of 1,024 threads.

Baseline: ``add_one_block<<<1, 1024>>>`` (vector_add.cu): the first kernel most people write after
"hello world", a loop over all n elements with a stride of blockDim.x, in the largest block there
is. It is correct, but the whole vector goes through one SM of 132, with 32 warps to cover DRAM
latency.
Optimized (optimized_vector_add.py): a grid-stride loop over a grid that fills every SM (blocks
per SM from ``cudaOccupancyMaxActiveBlocksPerMultiprocessor`` x SMs). Same 12 bytes per element,
same answer (bitwise); the grid decides how many SMs and warps pull on HBM. Both kernels move
float4s (one 128-bit load per operand, 4x unrolled), so the grid is the pair's one difference.
The baseline is deliberately the one-block kernel of the book's first lesson: the headline is the
optimized kernel's share of the HBM copy ceiling, not the ratio.
Expect (estimate, not yet measured at 128M elements, resized so the ~5 us launch and tail stop
costing ~4% of the call): ~15.6 -> ~0.44 ms. At 32M (measured, H200, 2026-11-26): 3.91 -> 0.1237 ms, 31.59x [31.13, 32.05]; the baseline at
103 GB/s (one SM), the optimized at 3.25 TB/s, 77% of the 4.2 TB/s HBM copy ceiling (estimated
2-6 ms and 83-90%). Earlier, measured on an H200 with 4-byte loads in both: 13.0 -> 0.125 ms
(31 -> 3,233 GB/s, 77%), 105x [102, 108]: float4 made the one-block baseline 3.3x faster and left
the grid-stride kernel at the same share (what holds it at 77% is not profiled).
Run: python ch06/baseline_vector_add.py  |  aisp bench run -t ch06:vector_add
"""

from __future__ import annotations

from ch06_common import BIG_VECTOR, VectorAdd

import aisp
from aisp.kits import native


class OneBlockAdd(VectorAdd):
    workload = BIG_VECTOR

    def launch(self) -> int:
        return self.lib.add_one_block_run(*self.pointers(), native.stream(self.device))


def get_benchmark() -> aisp.Benchmark:
    return OneBlockAdd()


if __name__ == "__main__":
    aisp.main(get_benchmark)
