"""Baseline training step: a small GPT trained eagerly under bf16 autocast.

Baseline: each SGD step runs the GPT forward, backward and update op by op: every LayerNorm,
GELU, residual add and cast is its own kernel that reads and writes the full activation, and
the host launches each of them (hundreds of launches per step).
Optimized (optimized_training_standard.py): the same model and update under ``torch.compile``:
Inductor fuses the elementwise chains into the matmul epilogues and a few Triton kernels, so
fewer bytes move and far fewer kernels launch. Same FLOPs, same losses and logits.
Expect: 1.3-2x more tokens/s (goodput) on an H100/H200; the matmuls stay the same cuBLAS calls.
Measured on our H200: 19.8 -> 14.7 ms per run (1.35x), 0.83 -> 1.12 M tokens/s.
Tolerance: bf16 autocast in both; Inductor fuses and reorders bf16 math, and the second step
starts from weights updated with slightly different gradients, so logits (|z| up to ~4, bf16
ulp 0.0156 there) differ by a few ulps anywhere, near-zero logits included: element_tol 0.015 (0.06 at |logits| up to ~4),
rtol 5e-2 (measured max 0.023). A skipped update or a wrong layer errs by O(0.1-1).
Run: python ch13/baseline_training_standard.py  |  aisp bench run -t ch13:training_standard
"""

from __future__ import annotations

import torch
from ch13_gpt import TrainBench, train_workload

import aisp
from aisp.kits.gpt import GPTConfig

WORKLOAD = train_workload(model=GPTConfig(vocab=8192, seq=512, dim=768, heads=12, layers=6), batch=16,
                          precision="bf16", element_tol=0.015, rtol=5e-2,
                          requires=aisp.Requirements(cuda=True, packages=("triton",)),
                          timeout_s=900,
                          ceiling_note="profiled (torch profiler, H200): _graph 13.3 ms of kernels in a 14.0 ms replay (busy 95%): GEMMs ~half (tensor pipe 74-82%), attention, norms")


class EagerTraining(TrainBench):
    workload = WORKLOAD
    autocast = torch.bfloat16


def get_benchmark() -> aisp.Benchmark:
    return EagerTraining()


if __name__ == "__main__":
    aisp.main(get_benchmark)
