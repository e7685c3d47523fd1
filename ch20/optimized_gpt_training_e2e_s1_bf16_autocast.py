"""Optimized GPT training, stage 1 of 3: bf16 autocast (ch13: precisionmixed; ch19 for low precision).

Baseline (baseline_gpt_training_e2e.py): fp32 eager GPT step, matmuls on the fp32 FMA pipes.
Optimized: forward and loss under ``torch.autocast(dtype=torch.bfloat16)``: matmuls (and the
attention's two batched matmuls) run on the bf16 tensor cores with fp32 accumulation, activations
between them are bf16 (half the bytes), softmax, norms and the loss stay fp32; weights, gradients
and AdamW stay fp32. Same model, same update.
Expect (measured, H200, 2026-11-26): 112.0 ms, 3.36x [3.35, 3.37] over the baseline, 125 TFLOP/s,
MFU 12.6% (estimated ~5x, MFU ~24%): the written-out attention and elementwise passes now weigh.
Run: python ch20/optimized_gpt_training_e2e_s1_bf16_autocast.py  |  aisp bench run -t ch20:gpt_training_e2e
"""

from __future__ import annotations

import torch
from baseline_gpt_training_e2e import FP32EagerTraining

import aisp


class BF16Training(FP32EagerTraining):
    autocast = torch.bfloat16


def get_benchmark() -> aisp.Benchmark:
    return BF16Training()


if __name__ == "__main__":
    aisp.main(get_benchmark)
