"""Baseline optimizer step (2 GPUs): all-reduce, then the whole AdamW step on every rank.

Baseline: mixed-precision data parallelism on 128 M parameters: bf16 weights and gradients, fp32
master weights and AdamW moments. Each call: copy this rank's bf16 gradients into the reduce
buffer, all-reduce (average) them, cast to fp32, run the fused AdamW kernel over all 128 M master
weights, cast them back into the bf16 weights. Every rank holds and updates the same optimizer
state: 12 bytes per parameter (master, m, v) x 128 M = 1.5 GB, replicated on each GPU.
Optimized (optimized_zero_sharding_multigpu.py): ZeRO stage 1/2: reduce-scatter the gradients,
update only this rank's 1/world shard of master weights and moments, all-gather the bf16 weights.
Headline: peak memory per rank (baseline / optimized); the time is reported too.
Expect (measured, 2 x H200, 2026-11-26): peak memory 2.95 -> 1.88 GB per rank, 22.0 -> 14.0 bytes
per parameter, 1.57x less (estimated 1.5-1.6x); time 2.841 -> 2.222 ms (same bytes on NVLink, half
the AdamW work).
Run: aisp bench run -t ch04:zero_sharding_multigpu  (the harness starts 2 ranks under torchrun)
"""

from __future__ import annotations

import torch
from ch04_common import TWO_RANKS, all_reduce_mean_, own, rank_device, shared
from ch04_zero import ZeroWorkload, adamw_

import aisp


def _workload() -> ZeroWorkload:
    w, ranks = ZeroWorkload(), TWO_RANKS.world_size
    grad_bytes = 2.0 * w.params  # bf16 gradients, and bf16 weights: 256 MiB each
    # Ceiling (time; the headline is memory): NVLink bytes of ZeRO's exchange. The reduce-scatter sends
    # (N-1)/N of the bf16 gradients from each rank and the all-gather (N-1)/N of the bf16 weights, so
    # 2(N-1) x 256 MiB in all, counted once by its sender (as an all-reduce of the gradients would):
    # 512 MiB at 2 x 392.4 GB/s, 0.684 ms. AdamW's HBM traffic on the shards (28 B a parameter:
    # master, m, v read and written, bf16 gradient in, bf16 weight out) is 3.76 GB at 2 x 4.16 TB/s,
    # 0.45 ms, and can overlap the exchange chunk by chunk: the NVLink bound is the longer.
    return ZeroWorkload(bytes=2.0 * (ranks - 1) * grad_bytes, link="nvlink",
                        ceiling_note="profiled (torch profiler, 2xH200): _pipelined 1.32 ms a call, GPU busy 83%: AdamW kernels "
                                     "0.61 ms, waits on the peer's signals 0.46, puts 0.17, a barrier 0.07")


WORKLOAD = _workload()


class ReplicatedAdamW(aisp.Benchmark):
    """Gradients in (``grads``: this rank's, bf16), updated bf16 weights out (``params``)."""

    workload = WORKLOAD
    inputs = ("grads",)
    scratch = ("params", "reduced")
    state = ("master", "exp_avg", "exp_avg_sq", "steps")

    def setup(self) -> None:
        self.device = rank_device(self)
        n = self.workload.params
        self.master = torch.randn(n, generator=shared(self), device=self.device)
        self.params = self.master.to(torch.bfloat16)
        self.grads = torch.randn(n, generator=own(self), device=self.device).to(torch.bfloat16)
        self.prepare()

    def prepare(self) -> None:
        self.exp_avg, self.exp_avg_sq = torch.zeros_like(self.master), torch.zeros_like(self.master)
        self.steps = torch.zeros((), device=self.device)
        self.reduced = torch.empty_like(self.grads)

    def run(self) -> torch.Tensor:
        self.reduced.copy_(self.grads)
        all_reduce_mean_(self.reduced)
        adamw_(self.master, self.reduced.float(), self.exp_avg, self.exp_avg_sq, self.steps)
        return self.params.copy_(self.master)


def get_benchmark() -> aisp.Benchmark:
    return ReplicatedAdamW()


if __name__ == "__main__":
    aisp.main(get_benchmark)
