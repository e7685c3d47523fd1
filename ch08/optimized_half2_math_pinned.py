"""Optimized half2 math, chains pinned to both fp16 pipes (CUDA C++): packed math, the pipes shared.

Baseline (baseline_half2_math.py): fp16 data widened to fp32, two chains of 128 FFMAs per thread.
Optimized: the packed ``__hfma2`` Horner chain (the lesson) with ILP on top, as ``_ilp``; here the
two fp16 pipes share the loop by construction. ``_ilp``'s profile (H200: SM 77%, MMA pipe 73%, top
stall math_pipe_throttle) and its SASS show ptxas running ~120 ``HFMA2.MMA`` in a row, then the FMA
pipe's chains: the pipes busy in turn. ``poly_half2_pinned`` (half2_poly.cu, mode 3) takes 8
__half2 a thread (two 16-byte loads) and writes two of its four chain pairs as ``fma.rn.oob.f16x2``
(``HFMA2.OOB``: the FMA pipe's opcode with a flag, never ``.MMA``; .oob differs only for NaN
operands, which the clamp rules out); each of those chains runs two __half2 back to back (the
second's first step multiplies the first's result by 0: c, the bits of poly2's 0 x v + c). ptxas
then puts the four plain chains on the MMA pipe. Its sm_90 loop (nvcc 13): 1,020 of 1,062
instructions are HFMA2, 512 ``HFMA2.OOB`` + 508 ``HFMA2.MMA`` + 4 ``HFMA2`` (``_ilp``: 256 + 256
in phases); ~60% of the loop alternates the two, the rest still holds runs of ``HFMA2.MMA`` (~150 and
~65). 28 registers: 8 blocks of 256 an SM as ``_ilp``. Same HFMA2s per element: ``poly_half2``'s bits.
Expect: not yet measured. Estimate (arithmetic, not a measurement): an issue model of one SM
sub-partition (16 warps, ptxas's stall counts, each fp16 pipe one warp instruction per 2 cycles)
gives this loop 0.82-0.87 HFMA2 a cycle against _ilp's 0.79-0.81, i.e. 0.170-0.178 ms against _ilp's
0.183 ms (74-80% -> 77-83% of 123.7 TFLOP/s); the same model once overrated a variant by 30%
(README, section 7), and HFMA2.OOB's issue rate is undocumented: it may not gain. 17.2 GFLOP, 256 MiB.
Run: python ch08/optimized_half2_math_pinned.py  |  aisp bench run -t ch08:half2_math
"""

from __future__ import annotations

from baseline_half2_math import Fp32MathOnHalf

import aisp


class Half2MathPinned(Fp32MathOnHalf):
    mode = 3
    """half2_poly.cu's poly_half2_pinned: 8 __half2 a thread, chains pinned to the two fp16 pipes."""


def get_benchmark() -> aisp.Benchmark:
    return Half2MathPinned()


if __name__ == "__main__":
    aisp.main(get_benchmark)
