"""Baseline P2P copy (2 GPUs): move 256 MiB to the other GPU through pinned host memory.

Baseline: each of two ranks sends a 256 MiB tensor from its GPU to the other GPU (rank 0: GPU0 ->
GPU1, rank 1: GPU1 -> GPU0, both at once) through a pinned host buffer: a device-to-host copy on
its own GPU's stream, then, ordered by an event, a host-to-device copy on the peer's stream. Two
hops over PCIe (~55 GB/s each, one after the other): ~10 ms. The rank's own stream then waits on
the peer's, so the harness's timing (on this rank's GPU) covers the whole transfer.
Optimized (optimized_p2p_copy_multigpu.py): ``dst.copy_(src)`` between the devices: PyTorch enables
peer access and the copy engine moves the data GPU to GPU over NVLink, never touching the host.
Expect (measured, 2 x H200 joined by NV18, 2026-11-26): 9.754 -> 0.7182 ms, 13.59x
[13.47, 13.71] (estimated 8-15x). The baseline moves its 256 MiB at 27.5 GB/s end to end (two PCIe
hops in turn); the peer copy at 373.8 GB/s, 95% of the 392 GB/s per-direction p2p copy peak that
``aisp peak`` measured on the same pair (the roofline's p2p_copy ceiling). On GPUs joined only by
PCIe, P2P still saves the host hop (estimate, not measured: ~2x).
Run: aisp bench run -t ch02:p2p_copy_multigpu  (launches 2 ranks under torchrun)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import aisp


@dataclass(frozen=True, kw_only=True)
class PeerCopyWorkload(aisp.Workload):
    mib: int = 256


WORKLOAD = PeerCopyWorkload(bytes=2 * 256.0 * 2**20, link="nvlink", precision="exact", requires=aisp.Requirements(gpus=2))
"""``bytes``: the 256 MiB (``mib``) each of the 2 ranks sends, both at once (512 MiB over NVLink, summed over
the ranks), judged against 2 x ``aisp peak``'s p2p_copy (each GPU sending at its own rate)."""


def peer_of(device: torch.device) -> torch.device:
    """The next GPU after ``device`` (the other one of two)."""
    index = torch.cuda.current_device() if device.index is None else device.index
    return torch.device("cuda", (index + 1) % torch.cuda.device_count())


class HostBounceCopy(aisp.Benchmark):
    """GPU -> pinned host -> peer GPU."""

    workload = WORKLOAD
    inputs = ("src",)
    scratch = ("dst", "staging")

    def make_buffers(self) -> None:
        """The source here and the destination on the peer GPU (both variants)."""
        count = self.workload.mib * 2**20 // 4
        self.peer = peer_of(self.device)
        self.src = torch.randn(count, generator=self.generator(), device=self.device)
        self.dst = torch.empty(count, device=self.peer)

    def setup(self) -> None:
        self.make_buffers()
        self.staging = torch.empty(self.src.numel()).pin_memory()
        self.to_host, self.to_peer = torch.cuda.Event(), torch.cuda.Event()

    def run(self) -> torch.Tensor:
        mine, theirs = torch.cuda.current_stream(self.device), torch.cuda.current_stream(self.peer)
        self.staging.copy_(self.src, non_blocking=True)           # on this GPU's stream
        self.to_host.record(mine)
        theirs.wait_event(self.to_host)
        with torch.cuda.device(self.peer):
            self.dst.copy_(self.staging, non_blocking=True)       # on the peer's stream
            self.to_peer.record(theirs)
        mine.wait_event(self.to_peer)                             # done when this GPU's stream is
        return self.dst


def get_benchmark() -> aisp.Benchmark:
    return HostBounceCopy()


if __name__ == "__main__":
    aisp.main(get_benchmark)
