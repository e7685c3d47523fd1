"""Optimized block size, float4 variant (CUDA C++): the recommended 256-thread blocks, each thread
8 elements as 16-byte loads, all of its loads issued before its first store.

Baseline (baseline_block_size.py): ``add_per_element<<<n / 32, 32>>>``; the 32-blocks-per-SM limit
leaves each SM half full, and 1,048,576 blocks retire about as fast as they launch.
Optimized: ``add_blocked4<<<n / 2048, 256>>>`` (vector_add.cu). The block size stays the lesson's
256 (8 blocks fill an SM's 2,048 threads); what changes is the work a thread brings. Nsight Compute
put optimized_block_size (one 4-byte element per thread) at DRAM 71%, occupancy 74%,
long_scoreboard 40.8: at most 8 B of reads per thread, 16 KiB per SM, about what Little's law asks
(~15 KiB), and 131,072 blocks passing through 1,056 slots. Here thread t of block j reads the float4s
j * 512 + t and j * 512 + 256 + t of a and of b (4 LDG.E.128 before the first STG.E.128; each warp
load 512 contiguous bytes): 64 B in flight per thread, 128 KiB per SM, 8x the bytes; 16,384 blocks,
8x fewer. ptxas: 27 registers, no spill, so still 8 blocks of 256 per SM (tests/test_ch06_sass.py).
Same 12 bytes per element, each read once and written once; the same FADD per element: bitwise the
baseline's answer. Needs n % 4 == 0 and 16-byte-aligned tensors (else -1; 32M fresh tensors are).
Expect (measured, H200, 2026-11-29; two runs of 20 samples): 0.0952 ms median both times (min
0.0943, 0.0935) against optimized_block_size's 0.1205 and 0.1228: the 384 MiB at 4.23 TB/s, 100% of
the HBM copy ceiling (the estimate was 0.100-0.108); the pair 6.68x and 6.60x.
Run: python ch06/optimized_block_size_float4.py  |  aisp bench run -t ch06:block_size
"""

from __future__ import annotations

from optimized_block_size import FullBlocksAdd

import aisp
from aisp.kits import native


class Float4BlocksAdd(FullBlocksAdd):
    """c = a + b through add_blocked4: 256-thread blocks, 2 float4s of a and of b per thread."""

    def launch(self) -> int:
        return self.lib.add_blocked4_run(*self.pointers(), native.stream(self.device))


def get_benchmark() -> aisp.Benchmark:
    return Float4BlocksAdd()


if __name__ == "__main__":
    aisp.main(get_benchmark)
