"""Optimized TMA tile copy (CUDA C++): the Tensor Memory Accelerator loads each 2-D tile.

Baseline (baseline_tma_tile_copy.py): 256 threads load a 34x68 halo tile element by element, with
index arithmetic, edge checks and unaligned 4-byte loads.
Optimized: the host encodes a tensor map of the image (``cuTensorMapEncodeTiled``, reached through
``cudaGetDriverEntryPointByVersion``, box 72x34 floats, out-of-bounds fill zero); in the kernel one
thread initialises an mbarrier, issues one ``cp.async.bulk.tensor.2d`` for the box's corner
(column c0-4, row r0-1: coordinates outside the image are filled with zeros by the hardware, which
is the image border for free; the column is c0-4, not c0-1, because a TMA box must start on a
16-byte boundary of the row, or the SM stops with an illegal instruction) and arrives with the
expected byte count; the block waits on the barrier (tma_tile_copy.cu, ``stencil_tma``; SASS
``UTMALDG``). The copy engine generates the addresses, so the threads issue no loads at all;
compute and stores are the baseline's.
Expect: measured on an H200 (re-run after the fix; the first run stopped on the unaligned box):
0.322 ms → 0.293 ms, 1.10x [1.09, 1.11]; 3,661 GB/s, 87% of the HBM copy (the baseline was
already at 3,335 GB/s, 79%).
Run: python ch07/optimized_tma_tile_copy.py  |  aisp bench run -t ch07:tma_tile_copy
"""

from __future__ import annotations

from baseline_tma_tile_copy import ThreadTileStencil

import aisp


class TmaTileStencil(ThreadTileStencil):
    use_tma = 1


def get_benchmark() -> aisp.Benchmark:
    return TmaTileStencil()


if __name__ == "__main__":
    aisp.main(get_benchmark)
