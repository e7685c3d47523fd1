"""Baseline reduction through the host (1 GPU): shards copied to the CPU, summed there, copied back.

Baseline: 8 shards of 8 M fp32 values (partial results of 8 workers, 256 MB on the GPU) are summed
into one 32 MB tensor the way code that reaches for NumPy does it: one device-to-host copy of all
shards into a pinned buffer allocated once, a wait for it, ``torch.sum`` on the CPU, and a
host-to-device copy of the result. 288 MB cross PCIe (~55 GB/s pinned: ~5 ms) and the CPU reads
256 MB; the GPU idles. A deliberately naive baseline: the headline is the optimized variant's share
of the HBM ceiling, not the ratio.
Optimized (optimized_cpu_reduction.py): ``torch.sum`` over the shard dimension on the GPU: 256 MB
read and 32 MB written in HBM.
Expect (measured, H200, 2026-11-23): 8.764 -> 0.1145 ms, 73.9x [69.1, 79.1] (estimated 50-150x); the
optimized at 2.64 TB/s, 63% of the 4.2 TB/s HBM copy rate (0.072 ms would be 100%); the baseline
spends ~5.5 ms on PCIe. On a CPU (estimate): 1.2-2x, where the baseline's "transfer" is a memcpy.
Run: python ch04/baseline_cpu_reduction.py  |  aisp bench run -t ch04:cpu_reduction
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import aisp


@dataclass(frozen=True, kw_only=True)
class ReductionWorkload(aisp.Workload):
    shards: int = 8
    numel: int = 8 * 2**20
    """fp32 values per shard."""


_SHAPE = ReductionWorkload()
WORKLOAD = ReductionWorkload(bytes=4.0 * (_SHAPE.shards + 1) * _SHAPE.numel, link="hbm", precision="fp32",
                             flops=float(_SHAPE.shards - 1) * _SHAPE.numel, items=_SHAPE.numel, item_unit="values")
"""``bytes``: the fewest a sum on the device moves (read every shard once, write the result once)."""


class HostReduction(aisp.Benchmark):
    workload = WORKLOAD
    inputs = ("shards",)
    scratch = ("staging", "host_sum", "out")

    def setup(self) -> None:
        w = self.workload
        self.shards = torch.randn(w.shards, w.numel, generator=self.generator(), device=self.device)
        self.out = torch.empty(w.numel, device=self.device)
        self.prepare()

    def prepare(self) -> None:
        pin = self.device.type == "cuda"
        self.staging = torch.empty(self.shards.shape, pin_memory=pin)
        self.host_sum = torch.empty(self.workload.numel, pin_memory=pin)

    def run(self) -> torch.Tensor:
        self.staging.copy_(self.shards)
        torch.sum(self.staging, dim=0, out=self.host_sum)
        return self.out.copy_(self.host_sum, non_blocking=True)


def get_benchmark() -> aisp.Benchmark:
    return HostReduction()


if __name__ == "__main__":
    aisp.main(get_benchmark)
