"""Baseline pipeline schedule (2 GPUs): GPipe, all forwards then all backwards.

Baseline: a 2-stage pipeline (one stage per rank, 4 x Linear(4096) + GELU each, bf16) trains one
step on 8 micro-batches of 512 samples: every stage runs all 8 forwards (sending activations on),
then all 8 backwards (sending gradients back). Each stage keeps all 8 micro-batches' activations
alive until its backwards start: 8 x 4 layers x (Linear input + GELU input) x 512 x 4096 x 2 B
= 256 MB per stage, beside 134 MB of weights and 134 MB of gradients.
Optimized (optimized_pipeline_parallel_multigpu.py): 1F1B, the same work reordered so a stage holds
at most (stages - stage) micro-batches (2 on the first stage: 64 MB).
Headline: peak memory per rank; metric ``bubble_fraction`` = (p-1)/(m+p-1) = 1/9 = 11% of the step,
the same in both schedules (both have p-1 idle slots per stage; 1F1B changes the order, not the count).
Expect (measured, 2 x H200, 2026-11-26): peak memory 486.6 -> 276.9 MB per rank, 1.76x less
(estimated ~530 -> ~340 MB, 1.4-1.6x); time 10.11 -> 10.66 ms (same work, same bubble: 1/9 in both).
Run: aisp bench run -t ch04:pipeline_parallel_multigpu  (the harness starts 2 ranks under torchrun)
"""

from __future__ import annotations

from ch04_pipeline import GPipe, pp_workload

import aisp

WORKLOAD = pp_workload(
    ceiling_note="profiled (memory, 2 x H200): 1F1B rank 0 peaks at 493 MiB: weights 128, grads and backward "
                 "temporaries 200, activations 109, batch 32, P2P buffers 24")


class Baseline(GPipe):
    workload = WORKLOAD


def get_benchmark() -> aisp.Benchmark:
    return Baseline()


if __name__ == "__main__":
    aisp.main(get_benchmark)
