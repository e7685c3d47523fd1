"""Baseline expert parallelism: MoE token dispatch through per-call lists and all_to_all.

Baseline: 512 tokens of 4,096 (bf16) per rank, 8 experts over 2 GPUs, top-1 routing. Per call:
count tokens per destination, exchange the counts and copy them to the host (the CPU stalls
until the GPU has routed), split the tokens into per-peer tensors, allocate per-peer receive
tensors, all_to_all the lists (tokens, expert ids, and the results on the way back) and
concatenate each received list. Three host round trips' worth of idle GPU and a dozen small
copies for ~8 MiB of traffic per rank.
Optimized (optimized_expert_parallel_multigpu.py): slots computed on the GPU, three fixed-size
all_to_all_single calls between buffers allocated once; no host sync.
Expect: 1.2-1.5x on 2 x H200 at this decode-sized batch (latency-bound); measured 1.29x
[1.20, 1.34] (1.308 -> 1.016 ms, slowest rank). The padded exchange sends 2x the bytes and holds
50 MB of buffers against 21 MB, so at large batches the gap narrows.
Tolerance: bf16 defaults, though both variants do the same arithmetic on the same rows (the
gate and expert scale are applied in the same order), so their outputs are equal bit for bit.
Run: aisp bench run -t ch13:expert_parallel_multigpu  (two GPUs; the harness starts torchrun)
"""

from __future__ import annotations

from expert_parallel_common import ListDispatch, ep_workload

import aisp

WORKLOAD = ep_workload(window="idle")


class Baseline(ListDispatch):
    workload = WORKLOAD


def get_benchmark() -> aisp.Benchmark:
    return Baseline()
