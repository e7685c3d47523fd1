"""Baseline precision: a GPT training step in full fp32 (no TF32).

Baseline: weights, activations and matmuls in fp32; PyTorch's default keeps TF32 off for
matmuls, so every GEMM runs on the fp32 pipes (~51 TFLOP/s measured on our H200) and every
activation costs 4 bytes.
Optimized (optimized_precisionmixed.py): the same step under ``torch.autocast(dtype=bfloat16)``:
matmuls run on bf16 tensor cores (~800 TFLOP/s) and saved activations take 2 bytes; weights
and the SGD update stay fp32 (master weights), so no loss scaling is needed with bf16.
Expect: 5-10x on an H100/H200 (matmul-bound step). Measured on our H200: 131.5 -> 19.2 ms
(6.83x); 45 -> 311 TFLOP/s.
Tolerance: the optimized computes in bf16 (8 significant bits); two steps of the same SGD from
the same start give logits within a few bf16 ulps of fp32's (|z| up to ~4, ulp 0.0156):
element_tol 0.015 (0.06 at |z| ~4), rtol 5e-2 (measured max 0.030).
Run: python ch13/baseline_precisionmixed.py  |  aisp bench run -t ch13:precisionmixed
"""

from __future__ import annotations

from ch13_gpt import TrainBench, train_workload

import aisp
from aisp.kits.gpt import GPTConfig

WORKLOAD = train_workload(model=GPTConfig(vocab=8192, seq=512, dim=1024, heads=16, layers=4), batch=16,
                          precision="bf16", rtol=5e-2, element_tol=0.015, requires=aisp.Requirements(cuda=True),
                          ceiling_note="profiled: GEMMs 42% of 18.3 ms of kernels (tensor pipe 69-91%), dtype copies 16%, norms, elementwise, cat, softmax the rest; issue 17.7 ms")


class FP32Training(TrainBench):
    workload = WORKLOAD
    autocast = None


def get_benchmark() -> aisp.Benchmark:
    return FP32Training()


if __name__ == "__main__":
    aisp.main(get_benchmark)
