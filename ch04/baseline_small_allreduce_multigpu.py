"""Baseline small all-reduce (2 GPUs): NCCL all-reduces of 64 KB, one per layer.

Baseline: 16 bf16 tensors of 32,768 values (64 KB each, a decode step's tensor-parallel
activations, one per layer) are each copied into a reduce buffer (where the layer's GEMM would
have written it) and summed across ranks with ``dist.all_reduce``. At 64 KB the time is NCCL's
latency (kernel launch, proxy and protocol handshakes between the GPUs, ~10-20 us), not NVLink
bandwidth (64 KB at 450 GB/s is 0.15 us).
Optimized (optimized_small_allreduce_multigpu.py): the same sums through PyTorch symmetric memory's
one-shot all-reduce: each GPU reads the peers' buffers directly over NVLink (P2P loads, no
multicast) in one kernel.
Expect (measured, 2 x H200, 2026-11-26): 0.7291 -> 0.3666 ms, 2.03x [1.89, 2.18] (estimated 1.3-2x):
45.6 -> 22.9 us per layer, copy included. The baseline's calls vary widely (CV 70%).
Run: aisp bench run -t ch04:small_allreduce_multigpu  (the harness starts 2 ranks under torchrun)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from ch04_common import own, rank_device

import aisp


@dataclass(frozen=True, kw_only=True)
class SmallAllReduceWorkload(aisp.Workload):
    count: int = 16
    """All-reduces per call (layers)."""
    numel: int = 32768
    """bf16 values per all-reduce (64 KB)."""


# Ceiling (latency), what the optimized design needs: per all-reduce a small copy into the symmetric
# buffer and one kernel launch; its cross-GPU barrier has no floor in aisp peak (a lower bound). Not
# NCCL's all-reduce floor (messages): the one-shot kernel beats it (188% of it on the stored times).
WORKLOAD = SmallAllReduceWorkload(precision="bf16", items=16, item_unit="all-reduces",
                                  latency=aisp.LatencyCounts(launches=16, device_copies=16),
                                  ceiling_note="profiled (torch profiler, 2xH200): 16 one-shot kernels fill 145-263 us of a 586 us call "
                                               "(9-16 us each); the rest: copies to the symmetric buffer, host issue",
                                  requires=aisp.Requirements(gpus=2), timeout_s=180,
                                  window="idle")
"""gpus=2, not ranks=2: symmetric memory needs CUDA peers, so the optimized cannot run on gloo."""


class NcclAllReduces(aisp.Benchmark):
    workload = WORKLOAD
    inputs = ("x",)
    scratch = ("bufs", "out")

    def setup(self) -> None:
        w = self.workload
        self.device = rank_device(self)
        self.x = torch.randn(w.count, w.numel, generator=own(self), device=self.device).to(torch.bfloat16)
        self.out = torch.empty_like(self.x)
        self.bufs = list(self.out)

    def run(self) -> torch.Tensor:
        for row, buf in zip(self.x, self.bufs, strict=True):
            buf.copy_(row)
            dist.all_reduce(buf)
        return self.out


def get_benchmark() -> aisp.Benchmark:
    return NcclAllReduces()


if __name__ == "__main__":
    aisp.main(get_benchmark)
