"""Baseline gradient all-reduce in fp32 (2 GPUs): 256 MB of gradients averaged as they are.

Baseline: each rank's 64 M fp32 gradients (one flat bucket space, 256 MB) are copied into the
reduce buffer and averaged across ranks with one NCCL all-reduce: 4 bytes per value cross NVLink
(2 x (n-1)/n x 256 MB of bus traffic per rank).
Optimized (optimized_gradient_compression_multigpu.py): the same gradients cast to bf16 on the
way into the buffer, all-reduced in bf16 (half the bytes), cast back to fp32.
Expect (measured, 2 x H200, 2026-11-26): 1.051 -> 0.7908 ms, 1.32x [1.30, 1.35]. The baseline moves
its 256 MB at ~255 GB/s of bus bandwidth counting the whole call (the copy into the buffer included),
88% of the 290.6 GB/s ``aisp peak`` measured for a 256 MiB all-reduce (target: >= 80%).
Run: aisp bench run -t ch04:gradient_compression_multigpu  (the harness starts 2 ranks under torchrun)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch04_common import TWO_RANKS, all_reduce_mean_, own, rank_device

import aisp


@dataclass(frozen=True, kw_only=True)
class CompressionWorkload(aisp.Workload):
    numel: int = 64 * 2**20
    """Gradient values per rank (fp32)."""


def _workload() -> CompressionWorkload:
    w, ranks = CompressionWorkload(), TWO_RANKS.world_size
    # Ceiling: NVLink bytes of the bf16 design (the fp32 baseline's extra bytes show as its distance):
    # an all-reduce of S bytes over N ranks sends 2(N-1)/N x S from each rank, 2(N-1) x S in all
    # (counted once by its sender); S = 64 Mi values x 2 B = 128 MiB: 256 MiB at 2 x 392.4 GB/s, 0.342 ms.
    return CompressionWorkload(bytes=2.0 * (ranks - 1) * 2 * w.numel, link="nvlink", precision="bf16",
                               requires=TWO_RANKS, timeout_s=240,
                               ceiling_note="profiled (torch profiler, 2xH200): _pulled 0.61 ms of kernels a call: 14 mean reductions "
                                            "0.30 ms, 15 barriers 0.18, casts 0.13, in series; pulls beside")


WORKLOAD = _workload()
"""bf16 tolerance: the optimized rounds each value to bf16 (8 significant bits) before and after
the sum; on the CPU test the relative L2 error of the averaged gradients is ~2e-3 (README)."""


class Fp32AllReduce(aisp.Benchmark):
    workload = WORKLOAD
    inputs = ("grads",)
    scratch = ("out",)

    def setup(self) -> None:
        self.device = rank_device(self)
        self.grads = torch.randn(self.workload.numel, generator=own(self), device=self.device)
        self.out = torch.empty_like(self.grads)
        self.prepare()

    def prepare(self) -> None:
        """Untimed hook for the optimized variant's buffers."""

    def run(self) -> torch.Tensor:
        self.out.copy_(self.grads)
        all_reduce_mean_(self.out)
        return self.out


def get_benchmark() -> aisp.Benchmark:
    return Fp32AllReduce()


if __name__ == "__main__":
    aisp.main(get_benchmark)
