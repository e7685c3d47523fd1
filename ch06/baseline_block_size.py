"""Baseline block size (CUDA C++): c = a + b, one element per thread, in blocks of 32 threads.

Baseline: ``add_per_element<<<n / 32, 32>>>`` (vector_add.cu) over 32M floats. A warp-sized block
looks harmless, but an SM holds at most 32 resident blocks (Hopper), so 32-thread blocks cap it
at 32 x 32 = 1,024 threads: half of the 2,048 it could hold, so half the loads in flight to
cover DRAM latency. (Blocks of 32 also give the scheduler one warp per block to retire.)
Optimized (optimized_block_size.py): the same kernel in blocks of 256: 8 blocks fill an SM's
2,048 threads. Same grid of work, same 12 bytes per element, bitwise the same answer.
Expect: measured on an H200: 0.648 -> 0.133 ms, 4.88x [4.85, 4.91]: the 32-thread blocks
reach 621 GB/s (15% of the copy ceiling), more latency-bound than the 1.3-2x estimated.
Run: python ch06/baseline_block_size.py  |  aisp bench run -t ch06:block_size
"""

from __future__ import annotations

import dataclasses

from ch06_common import VECTOR, VectorAdd

import aisp
from aisp.kits import native

WORKLOAD = dataclasses.replace(
    VECTOR, ceiling_note="ncu: 256-thread kernel 115 us at DRAM 71% (3.39 TB/s), L2 82%, occupancy 74%, issue 24%, long_scoreboard 40.8: one 4-byte load per thread (inferred)")


class WarpBlocksAdd(VectorAdd):
    workload = WORKLOAD
    block = 32
    """Threads per block."""

    def launch(self) -> int:
        return self.lib.add_per_element_run(*self.pointers(), self.block, native.stream(self.device))


def get_benchmark() -> aisp.Benchmark:
    return WarpBlocksAdd()


if __name__ == "__main__":
    aisp.main(get_benchmark)
