"""Baseline gradient sync (2 GPUs): one NCCL all-reduce per parameter.

Baseline: the gradients of a GPT-2-small-shaped model (12 layers of width 768: 144 tensors, 85 M
fp32 values, 340 MB, from 3 KB layer-norm vectors to 9 MB MLP matrices) are averaged across ranks
one tensor at a time, in backward order: per tensor a copy into its reduce buffer (where backward
would have written it) and an all-reduce. 144 collectives: the ~100 small ones pay NCCL's latency
(~10-20 us each) for a few KB, and the large ones run one after another without the pipelining
of a few large calls.
Optimized (optimized_gradient_bucketing_multigpu.py): the same tensors copied into flat ~25 MB
buckets (DDP's default cap), one all-reduce per bucket (18 calls).
Expect (measured, 2 x H200, 2026-11-26): 7.41 -> 2.422 ms, 3.10x [2.89, 3.32] (estimated 1.3-2.5x;
the baseline's calls vary, CV 38%). The optimized moves its 340 MB at ~140 GB/s of bus bandwidth
counting the whole call (bucket copies included), short of the >= 80% of the 220-258 GB/s that
``aisp peak`` measured for 16-64 MiB all-reduces (not profiled).
Run: aisp bench run -t ch04:gradient_bucketing_multigpu  (the harness starts 2 ranks under torchrun)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from ch04_common import TWO_RANKS, all_reduce_mean_, own, rank_device

import aisp


@dataclass(frozen=True, kw_only=True)
class GradSyncWorkload(aisp.Workload):
    width: int = 768
    layers: int = 12
    bucket_mb: float = 25.0
    """Bucket cap in MB (10^6 bytes), as DDP's ``bucket_cap_mb``."""


def shapes(w: GradSyncWorkload) -> list[tuple[int, ...]]:
    """A transformer block's parameters per layer: qkv, attention projection, MLP up and down
    (weights and biases), two layer norms (weight and bias)."""
    d = w.width
    block = [(3 * d, d), (3 * d,), (d, d), (d,), (4 * d, d), (4 * d,), (d, 4 * d), (d,), (d,), (d,), (d,), (d,)]
    return block * w.layers


def _workload() -> GradSyncWorkload:
    w = GradSyncWorkload()
    ranks = TWO_RANKS.world_size
    grad_bytes = 4.0 * sum(math.prod(s) for s in shapes(w))  # 85.05 M fp32 values: 340.2 MB
    # Ceiling: NVLink bytes. An all-reduce of S bytes over N ranks must send 2(N-1)/N x S from each
    # rank (every rank must receive the other ranks' share of each element, reduced, and its sum):
    # 2(N-1) x S in all, counted once by its sender. The bucket copies are not counted: DDP's
    # backward writes the gradients into the buckets. 2 x 340.2 MB at 2 x 392.4 GB/s: 0.867 ms.
    return GradSyncWorkload(bytes=2.0 * (ranks - 1) * grad_bytes, link="nvlink", precision="fp32",
                            requires=TWO_RANKS, timeout_s=240,
                            ceiling_note="profiled (torch profiler, 2xH200): _pulled 2.08 ms a call under the profiler, GPU busy 65%: "
                                         "16 mean kernels 0.40 ms, 2 barriers 0.12, copy-engine pulls beside")


WORKLOAD = _workload()


class PerParameter(aisp.Benchmark):
    """This rank's gradients (``grads``) averaged over ranks, one all-reduce per tensor."""

    workload = WORKLOAD
    inputs = ("grads",)
    scratch = ("reduced",)

    def setup(self) -> None:
        self.device = rank_device(self)
        gen = own(self)
        self.grads = [torch.randn(s, generator=gen, device=self.device) for s in shapes(self.workload)]
        self.prepare()

    def prepare(self) -> None:
        self.reduced = [torch.empty_like(g) for g in self.grads]

    def run(self) -> list[torch.Tensor]:
        for grad, out in zip(reversed(self.grads), reversed(self.reduced), strict=True):
            out.copy_(grad)
            all_reduce_mean_(out)
        return self.reduced


def get_benchmark() -> aisp.Benchmark:
    return PerParameter()


if __name__ == "__main__":
    aisp.main(get_benchmark)
