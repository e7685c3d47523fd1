"""Optimized half2 math, 3 chains a thread (CUDA C++): packed __half2 math, both fp16 pipes mixed.

Baseline (baseline_half2_math.py): fp16 data widened to fp32, two chains of 128 FFMAs per thread.
Optimized: the lesson is unchanged, the packed ``__hfma2`` Horner chain (HFMA2, two fp16 FMAs an
instruction), with ILP on top as in optimized_half2_math_ilp.py; what changes is the chain count.
Hopper runs packed fp16 FMAs on two pipes, ``HFMA2`` (FMA pipe) and ``HFMA2.MMA`` (MMA pipe), each
one warp instruction every other cycle: the peak needs both busy at once. ``_ilp``'s 4 chains: ptxas
keeps each chain on one pipe and leaves the MMA-pipe ones to finish alone, a stretch of 128
``HFMA2.MMA`` in its loop; Nsight Compute counts the SM issuing on 77% of cycles, top stall
math_pipe_throttle (README, section 7). With 3 chains ptxas alternates every chain between the pipes:
``poly_half2_three`` (half2_poly.cu) gives each thread 3 __half2 of a 768-__half2 tile (three 4-byte
loads, coalesced, at immediate offsets), on _ilp's persistent grid (8 blocks of 256 an SM, 28
registers), the next tile loaded before this one's chains. Its sm_90 loop: 384 HFMA2 (192 + 192) of
410 instructions (93.7%), never more than 2 of one form in a row, 15-17 of each in any 32 (_ilp:
none of one form in some 16). Same clamp and HFMA2s in the same order per element as ``poly_half2``:
the same bits (GPU test).
Estimate (an issue model of one SM sub-partition, 16 warps: one instruction a cycle, each fp16 pipe
one every 2 cycles, ptxas's stall counts): 0.93-0.94 HFMA2 a cycle whatever the warp order, where
_ilp's loop gives 0.78 with warps in step (0.93 otherwise) and the peak probe's 0.94-0.95; scaled to
the probe and by _ilp's measured 76% against its 82%: ~0.145-0.160 ms, 87-96% of the fp16 SIMT
ceiling, if _ilp's shortfall is its pipe stretches: an estimate.
Expect: not yet measured on a GPU. 17.2 GFLOP, 256 MiB.
Run: python ch08/optimized_half2_math_three.py  |  aisp bench run -t ch08:half2_math
"""

from __future__ import annotations

from baseline_half2_math import Fp32MathOnHalf

import aisp


class Half2MathThree(Fp32MathOnHalf):
    mode = 5
    """half2_poly.cu's poly_half2_three: 3 packed chains a thread, a persistent grid (modes 3 and 4 are refused)."""


def get_benchmark() -> aisp.Benchmark:
    return Half2MathThree()


if __name__ == "__main__":
    aisp.main(get_benchmark)
