"""Optimized fp8 weight decode, fused step with programmatic dependent launch: ``_fused``'s 21 kernels
a step, each resident before the one it follows ends, the GEMVs' weights starting into L2 meanwhile.

Baseline (baseline_fp8_weight_decode.py): a graphed bf16 decode step of 8 tokens, bound by reading
1.13 GB of bf16 weights.
Optimized: ``_fused``'s step (the same kernels, math and 0.57 GB of e4m3 weights; its header has the
kernels), every kernel but the first launched with PDL (``ch16_pdl``; ch11:stream_priority's PDL
variant measured ~2.8 us hidden a kernel on an H200). ``_fused`` runs 21 graph nodes back to back:
each one's launch, ramp and tail (~1-3 us) wait for the node before to drain, and the 12 small
kernels (~0.067 ms a step, 8-512 programs each) leave HBM mostly idle. Here each small kernel lets the
next launch as it starts, and each GEMV lets the next launch once all its programs have run their K
loop; a launched kernel's programs take free SMs and wait (``griddepcontrol.wait``) until the kernel
before has completed and its writes are visible, so the order and the math are ``_fused``'s. A GEMV's
programs first issue a bulk L2 prefetch of their rows' first 512 bytes (64 KB a program: QKV and the
attention output whole, 15-17 MB of the others), which needs no wait: the weights stream during the
norm, RoPE, attention and the tail of the GEMV before.
Expect: not yet measured. Estimate (arithmetic, not a measurement): 20 node boundaries at ~0.7-1.5 us
hidden each (14-30 us) and 5-15 us of weights moved under the small kernels and GEMV tails: 0.22-0.245
ms a step, 3.5-3.9 ms for 16 steps (4.184 ms for ``_fused``), 2.2-2.45x over bf16, 58-65% of HBM. The
GEMVs' steady rate (69-77% of DRAM) is unchanged; PDL adds no bytes (prefetched lines are read once).
Run: python ch16/optimized_fp8_weight_decode_pdl.py  |  aisp bench run -t ch16:fp8_weight_decode
"""

from __future__ import annotations

from optimized_fp8_weight_decode_fused import FP8FusedDecode, FusedStep

import aisp


class PDLFusedStep(FusedStep):
    pdl = True


class FP8PDLDecode(FP8FusedDecode):
    step_type = PDLFusedStep


def get_benchmark() -> aisp.Benchmark:
    return FP8PDLDecode()


if __name__ == "__main__":
    aisp.main(get_benchmark)
