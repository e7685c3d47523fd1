"""Baseline L2 blocking: eight elementwise passes, each over a whole 256 MiB tensor.

Baseline: ``y = x * s`` then seven in-place passes (``y += c``, ``y *= s``, ...), as separate
library calls that cannot be fused (think of several optimizer or normalization steps). y is 4-5x
larger than the L2 cache (50-60 MiB), so every pass reads and writes all of it in HBM: 8 passes x
2 x 256 MiB = 4 GiB of DRAM traffic per call.
Optimized (optimized_l2_blocking.py): the same eight passes, one L2-sized chunk at a time (a quarter
of L2 per chunk): a chunk comes from HBM once, the next seven passes hit it in L2, and it is
written back once: 512 MiB of DRAM traffic. The chunk loop is captured as a CUDA graph in setup,
so its ~150 small kernels cost ~1.2 us each to launch, not ~6 us.
Ceiling: L2's, the 4 GiB the passes move at ``aisp peak``'s ``l2_bandwidth`` (``link="l2"``).
Expect (measured, H200, 2026-11-23): 1.15x [1.14, 1.16] (1.047 -> 0.914 ms); below the 1.3-2x first
estimated: the baseline already streams at 98% of the HBM copy rate, and L2 is only about twice as
fast.
Run: python ch02/baseline_l2_blocking.py  |  aisp bench run -t ch02:l2_blocking
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import aisp

SCALE, SHIFT = 0.5, 1.0
"""The passes alternate y += SHIFT and y *= SCALE: values stay near 2, nothing overflows."""


@dataclass(frozen=True, kw_only=True)
class PassesWorkload(aisp.Workload):
    elements: int = 64 * 2**20
    passes: int = 8


WORKLOAD = PassesWorkload(bytes=8 * 2 * 4.0 * 64 * 2**20, link="l2", precision="fp32",
                          requires=aisp.Requirements(cuda=True),
                          ceiling_note="profiled (ncu, H200): a 15 MiB chunk's pass runs 8.7 us at L2 75% (5.6 TB/s); "
                                       "144 such graph nodes a call, each chunk's first reading x from HBM")
"""bytes: what L2 carries, each of the 8 passes reading and writing the 256 MiB fp32 tensor (4 GiB),
held to ``aisp peak``'s ``l2_bandwidth`` (``link="l2"``): the blocked variant's bound. HBM's share is
x read once and y written once (512 MiB); the baseline, which streams all 4 GiB from HBM, reads low."""


def passes(x: torch.Tensor, y: torch.Tensor, count: int) -> None:
    """y = x * SCALE, then count - 1 in-place passes over y, each a separate kernel."""
    torch.mul(x, SCALE, out=y)
    for i in range(1, count):
        if i % 2:
            y.add_(SHIFT)
        else:
            y.mul_(SCALE)


def chunked_passes(x: torch.Tensor, y: torch.Tensor, count: int, chunk: int) -> None:
    """The same passes, all of them on one ``chunk``-element slice before the next."""
    for xs, ys in zip(x.split(chunk), y.split(chunk), strict=True):
        passes(xs, ys, count)


class WholeTensorPasses(aisp.Benchmark):
    """Every pass streams the whole tensor through HBM."""

    workload = WORKLOAD
    inputs = ("x",)
    scratch = ("y",)

    def setup(self) -> None:
        self.x = torch.randn(self.workload.elements, generator=self.generator(), device=self.device)
        self.y = torch.empty_like(self.x)

    def run(self) -> torch.Tensor:
        passes(self.x, self.y, self.workload.passes)
        return self.y


def get_benchmark() -> aisp.Benchmark:
    return WholeTensorPasses()


if __name__ == "__main__":
    aisp.main(get_benchmark)
