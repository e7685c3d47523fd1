"""Optimized MLA decode, graphed, with the query projection streamed by a split-K Triton kernel.

Baseline (baseline_mla_absorption.py): every step up-projects the 302 MB latent cache to 16 heads of
keys and values (1.1 TFLOP, ~5 GB of expanded K/V written and read) and attends over them.
Optimized: optimized_mla_absorption_graph.py's graphed step, less cuBLAS's query projection. ``x @
W_q^T`` is 32 rows against a 3,072 x 2,048 weight (12.6 MB: ~3.6 us at 3.5 TB/s); the torch trace of
``_fused_qo`` (H200, 2026-11-29) showed an ``nvjet`` GEMM at 12.0 us a call (~1 TB/s if it is this
one): for 32 rows cuBLAS's tiles cover the output with few programs. ``ch18_mla_query.
projection_parts`` runs 192 programs (48 blocks of 64 weight rows x 4 K slices of 512), each with its
4 tile loads in flight at once, and writes fp32 partials (4 x 32 x 3,072: 1.5 MB, in L2); ``_absorb``
adds the 4 slices in order and rounds once to bf16, as the GEMM rounds its fp32 sums, so no
reduction launch. Only the summation order of the projection differs from cuBLAS's.
Expect: not yet measured. Estimate (arithmetic, not a measurement): the projection 4-5 us where the
GEMM took 6-12 us, the step 0.097-0.104 ms, ~75-80% of HBM.
Run: python ch18/optimized_mla_absorption_skinny.py  |  aisp bench run -t ch18:mla_absorption
"""

from __future__ import annotations

import torch
from ch18_mla_query import projection_parts
from optimized_mla_absorption_graph import GraphedLeanMLA

import aisp


class SkinnyGraphedMLA(GraphedLeanMLA):
    def projection(self) -> torch.Tensor:
        return projection_parts(self.x, self.w_q)


def get_benchmark() -> aisp.Benchmark:
    return SkinnyGraphedMLA()


if __name__ == "__main__":
    aisp.main(get_benchmark)
