"""Optimized dynamic parallelism (CUDA C++): each refinement level launched by the previous one on the GPU.

Baseline (baseline_dynamic_parallelism.py): the host launches each of ~17 levels after a D2H copy
of its interval count and a sync.
Optimized: dynamic_parallelism.cu ``dp_device``: one host launch of level 0; each level kernel's
first thread tail-launches the next level (``<<<grid, 256, 0, cudaStreamTailLaunch>>>``, CDP2),
which starts when the whole launching grid has finished and so sees its complete interval list.
The next level's size is unknown at launch time, so device levels run on a fixed grid (8 blocks
per SM) with a grid-stride loop; a level that finds no intervals launches nothing and the chain
ends. The host's stream sees one grid: the call ends when the last level does.
Expect (measured, H200, 2026-11-23): 1.45x [1.40, 1.49]; ~18 us per level, device launch latency
included.
Run: python ch12/optimized_dynamic_parallelism.py  |  aisp bench run -t ch12:dynamic_parallelism
"""

from __future__ import annotations

import torch
from baseline_dynamic_parallelism import HostLevels

import aisp
from aisp.kits import native


class DeviceLevels(HostLevels):
    def run(self) -> torch.Tensor:
        native.check(self.lib.dp_device(self.refine, self.workload.cells, native.stream(self.device)), "dp_device")
        return self.out

    def metrics(self) -> dict[str, float]:
        """Levels the last call ran: those whose interval list was not empty."""
        return {"levels": float((self.count[: self.workload.max_levels] > 0).sum())}


def get_benchmark() -> aisp.Benchmark:
    return DeviceLevels()


if __name__ == "__main__":
    aisp.main(get_benchmark)
