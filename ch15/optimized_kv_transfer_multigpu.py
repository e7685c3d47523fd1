"""Optimized KV transfer (2 GPUs): one NCCL send/recv of the packed pages, GPU to GPU.

Baseline (baseline_kv_transfer_multigpu.py): gather the pages, device -> shared pinned host ->
device in 32 MiB chunks (PCIe twice, pipelined: ~55 GB/s), scatter.
Optimized: the same gather on rank 0 and scatter on rank 1; between them ``dist.send`` of the
contiguous 256 MiB buffer and ``dist.recv`` into the receiver's buffer. NCCL moves it over NVLink
(peer-to-peer copy kernels, no host hop, no per-chunk handshake on the host); both calls are
stream-ordered, so the scatter is queued behind the receive without the host waiting.
Expect: (estimate, not yet measured; needs 2 GPUs) ~5-8x on two H100/H200 with NVLink 4; the
transfer itself near 80% of 450 GB/s; gather and scatter add ~0.25 ms of HBM traffic.
Run: aisp bench run -t ch15:kv_transfer_multigpu  (two GPUs; the harness starts torchrun)
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from baseline_kv_transfer_multigpu import WORKLOAD
from ch15_kv_transfer import RECEIVER, SENDER, TransferBench

import aisp


class NcclSend(TransferBench):
    workload = WORKLOAD

    def run(self) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        if self.rank == SENDER:
            self.gather()
            dist.send(self.staging, RECEIVER)
        else:
            dist.recv(self.staging, SENDER)
            self.scatter()
        return self.output()


def get_benchmark() -> aisp.Benchmark:
    return NcclSend()


if __name__ == "__main__":
    aisp.main(get_benchmark)
