"""Baseline activation memory: a GPT training step that keeps every activation for backward.

Baseline: the forward saves each block's intermediate tensors (LayerNorm outputs, QKV, the
attention output and log-sum-exp, the 4x-wide MLP hidden before and after GELU) until backward:
about 34 bytes x width per token per layer in bf16, which dominates peak memory at long batches.
Optimized (optimized_activation_checkpointing.py): ``torch.utils.checkpoint`` around each block
keeps only the block's input (2 bytes x width per token) and recomputes the block's forward
during backward: one extra forward (~1/3 more FLOPs) buys a peak of one block's activations.
Expect: peak memory 2-3x lower (headline: baseline peak / optimized peak), steps 1.2-1.35x
longer. Measured on our H200: 6.21 -> 2.01 GiB peak (3.09x), 63.5 -> 77.4 ms per run.
Tolerance: bf16 autocast in both; recomputation repeats the same kernels, but the attention
backward's atomics reorder gradient sums, and the second step's bf16 forward turns those tiny
weight differences into ulp flips: element_tol 0.015 (0.06 absolute), rtol 5e-2 on logits up to ~4 (measured max 0.024).
Run: python ch13/baseline_activation_checkpointing.py  |  aisp bench run -t ch13:activation_checkpointing
"""

from __future__ import annotations

import dataclasses

import torch
from ch13_gpt import TrainBench, TrainWorkload, train_workload

import aisp
from aisp.kits.gpt import GPTConfig


def least_resident_bytes(w: TrainWorkload) -> int:
    """The fewest bytes any correct design of this run() holds on the GPU at once: at its end, the
    fp32 parameters (both variants train an fp32 model under bf16 autocast; SGD keeps no other state),
    the token inputs (int64) and the output, the steps' fp32 losses and the last step's fp32 logits.
    A floor: gradients are left out (an update fused into backward frees each as it is made), as are
    activations (recompute drops them), autocast's bf16 copies and the start snapshot (read once at the
    call's start, unlike the weights every step computes with: the host could hold it)."""
    m = w.model
    inputs = 2 * 8 * w.steps * w.batch * m.seq
    return 4 * m.params() + inputs + 4 * w.steps + 4 * w.batch * m.seq * m.vocab


_SIZES = train_workload(model=GPTConfig(vocab=4096, seq=1024, dim=1024, heads=16, layers=8), batch=16,
                        precision="bf16", element_tol=0.015, rtol=5e-2, headline="memory",
                        ceiling_note=("profiled (memory, H200): peak 2.49 GiB: fp32 params and start snapshot 0.82, grads 0.53, "
                                      "logits and the loss's fp32 copy 0.54, a recomputed MLP 0.5"),
                        requires=aisp.Requirements(cuda=True))
WORKLOAD = dataclasses.replace(_SIZES, resident_bytes=least_resident_bytes(_SIZES))  # capacity floor, derived above


class StoreAllActivations(TrainBench):
    workload = WORKLOAD
    autocast = torch.bfloat16


def get_benchmark() -> aisp.Benchmark:
    return StoreAllActivations()


if __name__ == "__main__":
    aisp.main(get_benchmark)
