"""Baseline context parallelism: all-gather the whole sequence's K/V, then one attention call.

Baseline: the sequence (2 x 4,096 tokens, 32 heads of 128, bf16) is sharded across two GPUs.
Each rank gathers every rank's K and V into fresh lists (2 x 2 x 32 MiB received per call),
concatenates them (another copy of the whole sequence's K/V), and runs one fused attention call
of its 4,096 queries over all 8,192 keys. The gather is exposed: no compute runs while the
bytes cross NVLink, and every rank holds the whole sequence's K/V.
Optimized (optimized_context_parallel_multigpu.py): ring attention; K/V blocks stream to the
next rank while the rank computes on the block it has, partial results merged by online softmax.
Expect: 1.0-1.3x on 2 x H200 (the gather is a small part of the attention at this length);
measured 1.17x [1.16, 1.19] (1.325 -> 1.128 ms, slowest rank, NVLink NV18, torch 2.11). The
ring's first version ran FlashAttention-2 per block while SDPA picked cuDNN for the baseline:
0.71x; per-block attention now uses the kernel SDPA would pick.
Tolerance: bf16 defaults; the ring sums the softmax in two parts and rounds once more.
Run: aisp bench run -t ch13:context_parallel_multigpu  (two GPUs; the harness starts torchrun)
"""

from __future__ import annotations

import torch
from context_parallel_common import allgather_attention, cp_workload, make_shard

import aisp

WORKLOAD = cp_workload(ceiling_note="profiled (torch profiler, 2xH200): _pulled's kernels ~0.845 ms a call (2 cuDNN blocks "
                                    "0.41 + 0.40, merge 0.025; the pull beside block 1); timed 0.91-0.92")


class AllGatherAttention(aisp.Benchmark):
    workload = WORKLOAD
    inputs = ("q", "k", "v")

    def setup(self) -> None:
        self.q, self.k, self.v = make_shard(self)

    def run(self) -> torch.Tensor:
        return allgather_attention(self.q, self.k, self.v)


def get_benchmark() -> aisp.Benchmark:
    return AllGatherAttention()
