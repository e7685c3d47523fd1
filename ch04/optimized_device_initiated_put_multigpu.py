"""Optimized device-initiated put (2 GPUs): the whole ring in one kernel per GPU, NVSHMEM puts and
signals between them, no host in the loop.

Baseline (baseline_device_initiated_put_multigpu.py): 127 messages of 32 KB round a 2-rank ring,
each received, staged and sent on by host calls (NCCL send/recv and a kernel launch per message).
Optimized: nvshmem_ring.cu. In setup (untimed) the ranks join an NVSHMEM job (rank 0's unique id
broadcast through torch.distributed; see ch04_nvshmem.py) and allocate a symmetric inbox of 64
slots plus 64 signal words on every GPU. Each call then launches one kernel per GPU (NVSHMEM's
collective launch, as a kernel that waits on signals must be): for each round it waits until the
slot's signal holds this call's epoch, runs the same stage device function as the baseline
(ring_stage.cuh: same code, same reduction order), and ``nvshmemx_putmem_signal_block`` stores the
32 KB into the next GPU's slot over NVLink and then sets that slot's signal there. A hop costs an
NVLink write, a fence and a remote signal, with no launch, no host and no rendezvous protocol.
Without NVSHMEM (headers, libnvshmem_device.a, libnvshmem_host.so) the variant is skipped with the
reason; so it is when a GPU cannot reach the next one over P2P.
Expect (measured, 2 x H200, 2026-11-26; NVSHMEM 3.x wheel): 5.48 -> 0.8544 ms, 6.35x [6.09, 6.61]
(estimated 3-6x): ~6.7 us per message against ~43 us host-driven (estimated ~4-6 us a hop).
Run: aisp bench run -t ch04:device_initiated_put_multigpu
"""

from __future__ import annotations

import torch
from baseline_device_initiated_put_multigpu import HostDrivenRing
from ch04_nvshmem import alloc, check, join, load

import aisp
from aisp.kits import native


class DeviceInitiatedRing(HostDrivenRing):
    """One kernel per GPU and call; messages move by NVSHMEM put + signal."""

    scratch = ("out",)

    def prepare(self) -> None:
        w = self.workload
        self.slots = None
        self.lib = load(self.device)
        join(self.lib)
        self.slots = alloc(self.lib, w.width, w.rounds, self.device)
        self.epoch = 0  # calls since the signals were zeroed: a call's signals carry it, none is reset

    def run(self) -> torch.Tensor:
        w = self.workload
        self.epoch += 1
        status = self.lib.ring_run(native.ptr(self.x0), native.ptr(self.gain), native.ptr(self.out), *self.slots,
                                   w.width, w.rounds, self.epoch, native.stream(self.device))
        check(status, "ring_run")
        return self.out

    def teardown(self) -> None:
        if getattr(self, "slots", None) is not None:
            check(self.lib.ring_free(*self.slots), "ring_free")
            self.slots = None


def get_benchmark() -> aisp.Benchmark:
    return DeviceInitiatedRing()


if __name__ == "__main__":
    aisp.main(get_benchmark)
