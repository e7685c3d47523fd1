"""Optimized P2P copy (2 GPUs): ``dst.copy_(src)`` straight to the peer GPU over NVLink.

Baseline (baseline_p2p_copy_multigpu.py): each rank's 256 MiB crosses PCIe twice (GPU -> pinned host
-> peer GPU), the two hops one after the other.
Optimized: a device-to-device copy between the two GPUs. PyTorch enables peer access
(``cudaDeviceEnablePeerAccess``) and issues it on the source GPU's stream, with events both ways, so
the peer's stream sees the data when it is there; the copy engine moves it over NVLink (NV18 in
``topology.py``: 18 links x 25 GB/s per direction), one hop, no host memory.
Expect (measured, 2 x H200, NV18, 2026-11-26): 9.754 -> 0.7182 ms, 13.59x [13.47, 13.71];
373.8 GB/s per direction, 95% of the 392 GB/s p2p copy peak ``aisp peak`` measured there (NV18's
nominal rate: 450 GB/s).
Run: aisp bench run -t ch02:p2p_copy_multigpu
"""

from __future__ import annotations

import torch
from baseline_p2p_copy_multigpu import HostBounceCopy

import aisp


class PeerCopy(HostBounceCopy):
    scratch = ("dst",)

    def setup(self) -> None:
        self.make_buffers()

    def run(self) -> torch.Tensor:
        return self.dst.copy_(self.src, non_blocking=True)


def get_benchmark() -> aisp.Benchmark:
    return PeerCopy()


if __name__ == "__main__":
    aisp.main(get_benchmark)
