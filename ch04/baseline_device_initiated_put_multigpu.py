"""Baseline device-initiated put (2 GPUs): a ring pipeline with one NCCL send/recv per message, the
host driving every hop.

The work: pipeline-parallel decoding at batch 1. An activation of 8,192 fp32 values (32 KB) goes
round the ranks for 64 rounds (one token each); each rank's stage is one kernel (RMSNorm times a
per-stage gain, ring_stage.cu) and the last rank's output is the first rank's next input, so every
message waits for the one before: 2 x 64 - 1 = 127 messages in strict sequence at two ranks. Every
rank returns its 64 stage outputs.
Baseline: the host loop a pipeline runtime runs: per message ``dist.recv`` into the round's slot,
the stage kernel, ``dist.send`` on. Each hop pays NCCL's point-to-point protocol (a send kernel and a
receive kernel that meet over NVLink, some microseconds) and the host's work per rank and round
(three launches, two of them through ProcessGroupNCCL, tens of microseconds), which a chain of
dependent messages cannot hide.
Optimized (optimized_device_initiated_put_multigpu.py): one kernel per GPU runs all 64 rounds: it
waits on the signal the previous rank sets, runs the same stage and puts the 32 KB into the next
rank's inbox with ``nvshmemx_putmem_signal_block`` (stores over NVLink, then the signal).
Ceiling: the per-hop latency of NVLink (a put and a signal, ~2 us) plus the stage (~2 us): 127 hops
x ~4 us = ~0.5 ms. The 4 MB moved are nothing to 450 GB/s: this is latency, not bandwidth.
Expect (measured, 2 x H200, 2026-11-26; NVSHMEM 3.x wheel): 5.48 -> 0.8544 ms, 6.35x [6.09, 6.61]
(estimated ~2-3 -> ~0.5-0.8 ms, 3-6x): ~43 us -> ~6.7 us per message. The host-driven hop costs
more than the ~15-25 us estimated, and its calls vary (CV 35%).
Run: aisp bench run -t ch04:device_initiated_put_multigpu  (the harness starts 2 ranks under torchrun)
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from ch04_common import rank_device, shared

import aisp
from aisp.kits import native
from aisp.kits.multirank import world_and_rank

STAGE = native.Library((Path(__file__).resolve().parent / "ring_stage.cu",))
STAGE_SIGNATURES = {"ring_stage": [ctypes.c_void_p] * 3 + [ctypes.c_int, ctypes.c_void_p]}
EPS = 1e-6
"""As ``ring::kEps`` in ring_stage.cuh."""


@dataclass(frozen=True, kw_only=True)
class RingWorkload(aisp.Workload):
    width: int = 8192
    """fp32 values per message (one activation)."""
    rounds: int = 64
    """Trips round the ring (tokens); at least 2 (nvshmem_ring.cu reuses a slot one call later)."""
    world: int = 2

    def __post_init__(self) -> None:
        if self.width < 1 or self.rounds < 2 or self.world < 2:
            raise ValueError(f"a ring needs width >= 1, rounds >= 2 and world >= 2; got {self.width}, "
                             f"{self.rounds}, {self.world}")

    @property
    def messages(self) -> int:
        """Hops per call: every stage of every round sends on, except the last rank in the last round."""
        return self.world * self.rounds - 1


def ring_workload(**kw: object) -> RingWorkload:
    """The accounting: every message of every rank crosses NVLink once (``bytes``, summed over the ranks:
    each message counted once, by its sender); a message is an item."""
    w = RingWorkload(**kw)
    return RingWorkload(**kw, bytes=4.0 * w.width * w.messages, link="nvlink", items=w.messages,
                        item_unit="messages", precision="fp32", timeout_s=240,
                        ceiling_note="profiled (torch profiler, 2xH200): one ring kernel a GPU, 0.77-0.84 ms of a 0.99 ms call: "
                                     "127 dependent hops at 6.1-6.6 us (baseline's stage kernel 3.2)",
                        requires=aisp.Requirements(gpus=w.world, executables=("nvcc",)),
                        window="idle")


WORKLOAD = ring_workload()


def reference_stage(x: torch.Tensor, gain: torch.Tensor) -> torch.Tensor:
    """The stage in PyTorch (for CPU ranks and tests): x / rms(x) * gain."""
    return x * torch.rsqrt(x.square().mean() + EPS) * gain


class HostDrivenRing(aisp.Benchmark):
    """Per message: receive, stage kernel, send, each issued by the host."""

    workload = WORKLOAD
    inputs = ("x0",)
    scratch = ("inbox", "out")

    def setup(self) -> None:
        w = self.workload
        self.world, self.rank = world_and_rank()
        self.device = rank_device(self)
        gen = shared(self)
        self.x0 = torch.randn(w.width, generator=gen, device=self.device)
        self.gains = 1 + 0.1 * torch.randn(self.world, w.width, generator=gen, device=self.device)
        self.gain = self.gains[self.rank]  # this rank's stage
        self.out = torch.empty(w.rounds, w.width, device=self.device)
        self.prepare()

    def prepare(self) -> None:
        """Untimed: the receive slots and the stage kernel (PyTorch's on a CPU rank)."""
        self.inbox = torch.empty_like(self.out)
        self.lib = STAGE.load(self.device, STAGE_SIGNATURES) if self.device.type == "cuda" else None

    def stage(self, x: torch.Tensor, out: torch.Tensor) -> None:
        if self.lib is None:
            out.copy_(reference_stage(x, self.gain))
            return
        native.check(self.lib.ring_stage(native.ptr(x), native.ptr(self.gain), native.ptr(out), x.numel(),
                                         native.stream(self.device)), "ring_stage")

    def run(self) -> torch.Tensor:
        prev, nxt = (self.rank - 1) % self.world, (self.rank + 1) % self.world
        for k in range(self.workload.rounds):
            x = self.x0
            if self.rank or k:
                x = self.inbox[k]
                dist.recv(x, prev)
            self.stage(x, self.out[k])
            if nxt or k + 1 < self.workload.rounds:
                dist.send(self.out[k], nxt)
        return self.out


def get_benchmark() -> aisp.Benchmark:
    return HostDrivenRing()


if __name__ == "__main__":
    aisp.main(get_benchmark)
