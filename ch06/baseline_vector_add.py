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
Expect (measured, H200, 2026-11-27, 128M elements): 15.75 -> 0.4202 ms, 37.33x [36.87, 37.79]; the
baseline at 102 GB/s (one SM), the optimized at 3.83 TB/s, 90.8% of the HBM copy ceiling. At 32M
elements (measured, H200, 2026-11-26): 3.91 -> 0.1237 ms, 31.59x, the optimized at 77%: the launch
and the last wave's tail (~5 us) were ~4% of a 0.12 ms call.
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
