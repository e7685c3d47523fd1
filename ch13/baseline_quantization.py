"""Baseline quantization: a bf16 linear layer (16384 tokens x 16384 -> 16384), inference.

Baseline: ``F.linear(x, w)`` in bf16 on the tensor cores, 8.8 TFLOP per call near the measured
~800 TFLOP/s bf16 ceiling; weights take 2 bytes per value.
Optimized (optimized_quantization.py): int8 weight-activation quantization (W8A8): the weight
is quantized per output channel once (symmetric, scale = row amax / 127), the activation per
token in each call, ``torch._int_mm`` multiplies int8 x int8 into int32 on the integer tensor
cores, and one fused epilogue rescales by the token and channel scales back to bf16. Weights
take half the memory; integer tensor-core peak is twice bf16's.
Expect: 1.2-1.6x on an H100/H200 (the quantize and dequantize passes move ~2.5 GB per call;
at 8192^3 they ate most of the gain: 1.05x measured).
Tolerance: symmetric int8 rounds each operand by up to half a step (amax / 254); with
x ~ N(0, 1) and w ~ N(0, 1/K) the outputs are ~N(0, 1) and err by ~0.013 rms (measured
against fp32), ~0.08 at worst of 268M: atol 0.2, rtol 0 (a wrong scale or transposed weight
errs by O(1)).
Run: python ch13/baseline_quantization.py  |  aisp bench run -t ch13:quantization
"""

from __future__ import annotations

from baseline_precisionfp8 import BF16Linear, linear_workload

import aisp

WORKLOAD = linear_workload(tokens=16384, d_in=16384, d_out=16384, precision="int8", atol=0.2, rtol=0.0,
                           requires=aisp.Requirements(cuda=True, packages=("triton",)))


class BF16Inference(BF16Linear):
    workload = WORKLOAD


def get_benchmark() -> aisp.Benchmark:
    return BF16Inference()


if __name__ == "__main__":
    aisp.main(get_benchmark)
