"""Baseline quantization: a bf16 linear layer in the decode regime (64 tokens x 16384 -> 16384).

Baseline: ``F.linear(x, w)`` in bf16 for a decode step of 64 sequences. At 64 tokens the GEMM
does 64 FLOPs per weight byte, far left of the H200's bf16 ridge (~190 FLOP/byte), so its time
is reading the 512 MiB bf16 weight: memory-bound, ~0.15 ms at the 3.5-4 TB/s HBM streams.
Optimized (optimized_quantization.py): int8 weight-activation quantization (W8A8): the weight
is quantized per output channel once (symmetric, scale = row amax / 127), the activation per
token in each call, ``torch._int_mm`` multiplies int8 x int8 into int32, and one fused
epilogue rescales by the token and channel scales back to bf16. The weight read halves.
Expect: 1.3-1.8x on an H100/H200 from bytes alone, but measured SLOWER on our H200:
0.153 -> 0.172 ms (0.89x); bf16 reads its weight at 3.5 TB/s while the int8 path (two small
compiled passes plus cuBLASLt's int8 kernel at M = 64) does not reach half the time (not
profiled further). At a compute-bound 16384^3 the int8 path was no faster either (1.01x):
cuBLAS's int8 GEMM reached 865 TOPS vs bf16's 721 TFLOP/s, and the quantize (0.63 ms) and
dequantize (0.69 ms) passes ate the difference. On Hopper the fp8 pair is the one that pays.
Tolerance: symmetric int8 rounds each operand by up to half a step (amax / 254); with
x ~ N(0, 1) and w ~ N(0, 1/K) the outputs are ~N(0, 1) and err by ~0.013 rms (measured
against fp32 at 16384^3), ~0.07 at worst of 1M outputs: atol 0.2, rtol 0 (a wrong scale or
transposed weight errs by O(1)).
Run: python ch13/baseline_quantization.py  |  aisp bench run -t ch13:quantization
"""

from __future__ import annotations

from baseline_precisionfp8 import BF16Linear, linear_workload

import aisp

WORKLOAD = linear_workload(tokens=64, d_in=16384, d_out=16384, precision="int8", atol=0.2, rtol=0.0,
                           requires=aisp.Requirements(cuda=True, packages=("triton",)))


class BF16Inference(BF16Linear):
    workload = WORKLOAD


def get_benchmark() -> aisp.Benchmark:
    return BF16Inference()


if __name__ == "__main__":
    aisp.main(get_benchmark)
