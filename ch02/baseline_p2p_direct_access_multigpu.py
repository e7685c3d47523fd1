"""Baseline P2P direct access (2 GPUs): copy the peer's 256 MiB tensor here, then compute on it.

Baseline: each of two ranks needs ``out = x * w`` where x (256 MiB fp32) lives on the other GPU (a
tensor another stage produced) and w, out live on its own. It copies x over NVLink into a local
buffer (``local.copy_(x)``, a peer copy, already the fast path of p2p_copy_multigpu), then multiplies
locally: x crosses NVLink once, and then is written to and read back from local HBM (512 MiB more
traffic) in a second step, holding a 256 MiB copy.
Optimized (optimized_p2p_direct_access_multigpu.py): with peer access enabled, one CUDA C++ kernel
(p2p_direct.cu) loads x from the peer's memory over NVLink and w locally, and writes out: one pass,
no local copy of x.
Expect (measured, 2 x H200 joined by NV18, 2026-11-26): 0.9334 -> 0.8092 ms, 1.15x
[1.14, 1.17] (estimated 1.1-1.3x), and 256 MiB less peak memory per rank (805 -> 537 MB). Both are
bound by the NVLink read of x: the baseline covers its 256 MiB at 287.6 GB/s end to end, the
kernel's SM loads at 331.7 GB/s, 85% of the 392 GB/s the copy engine reaches (``aisp peak``'s
p2p_copy): SM loads keep the links nearly as busy as a peer copy, and the local write and re-read
of x are saved.
Run: aisp bench run -t ch02:p2p_direct_access_multigpu  (launches 2 ranks under torchrun)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from baseline_p2p_copy_multigpu import peer_of

import aisp


@dataclass(frozen=True, kw_only=True)
class PeerComputeWorkload(aisp.Workload):
    elements: int = 64 * 2**20


WORKLOAD = PeerComputeWorkload(flops=2 * 64.0 * 2**20, bytes=2 * 4.0 * 64 * 2**20, link="nvlink", precision="fp32",
                               requires=aisp.Requirements(gpus=2, executables=("nvcc",)))
"""Summed over the 2 ranks, each doing the same at once: ``bytes``, each rank's x (256 MiB) crossing NVLink
once, the bound (2 x p2p_copy); the local w/out HBM traffic is not counted. ``flops``: one multiply a value."""


class CopyThenMultiply(aisp.Benchmark):
    """Peer tensor copied here, then multiplied here."""

    workload = WORKLOAD
    inputs = ("x", "w")
    scratch = ("local", "out")

    def make_buffers(self) -> None:
        """x on the peer GPU; w and out here (both variants)."""
        n, gen = self.workload.elements, self.generator()
        self.peer = peer_of(self.device)
        self.w = torch.randn(n, generator=gen, device=self.device)
        self.x = torch.randn(n, generator=gen, device=self.device).to(self.peer)
        self.out = torch.empty(n, device=self.device)

    def setup(self) -> None:
        self.make_buffers()
        self.local = torch.empty_like(self.out)

    def run(self) -> torch.Tensor:
        self.local.copy_(self.x, non_blocking=True)
        return torch.mul(self.local, self.w, out=self.out)


def get_benchmark() -> aisp.Benchmark:
    return CopyThenMultiply()


if __name__ == "__main__":
    aisp.main(get_benchmark)
