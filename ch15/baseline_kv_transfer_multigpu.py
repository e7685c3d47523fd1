"""Baseline KV transfer (2 GPUs): the K/V pages go through pinned host memory.

Baseline: 16 requests of 2,048 tokens hand their K/V (the chapter's decoder: 8 KiB per token,
256 MiB in all, 2,048 scattered 16-token pages of a paged pool) from the prefill rank's GPU to the
decode rank's GPU, the way a server without a GPU-to-GPU transport does it: rank 0 gathers the
pages into one contiguous buffer, copies it to host memory that both rank processes map (a
/dev/shm file, pinned with cudaHostRegister), and rank 1 copies it to its GPU and scatters the
pages into its own pool. The two PCIe copies are pipelined through two 32 MiB slots (rank 0 fills
one while rank 1 drains the other; a barrier per chunk), so the path runs at about one PCIe
direction's pinned rate: ~55 GB/s on an H100/H200 host, ~5 ms plus one chunk.
Optimized (optimized_kv_transfer_multigpu.py): the same gather and scatter, and between them one
``dist.send`` / ``dist.recv`` of the contiguous buffer: NCCL copies GPU to GPU over NVLink
(450 GB/s per direction on NVLink 4), never touching the host.
Expect (measured, 2 x H200, 2026-11-26): 7.725 -> 2.048 ms, 3.80x [3.64, 3.98] (estimated 5-8x):
34.8 -> 131.0 GB/s of KV bytes end to end. The host path ran at 34.8 GB/s, not the ~55 GB/s
estimated; the NCCL path at 33% of these GPUs' 392.4 GB/s peer-copy peak (`aisp peak`), not ~70%.
Per rank (median): the sender finishes at 6.898 and 1.216 ms, the receiver (scatter included) at
7.725 and 2.048 ms; the split is not yet profiled. Throughput is reported in KV bytes per second.
Tolerance: exact (copies).
Run: aisp bench run -t ch15:kv_transfer_multigpu  (two GPUs; the harness starts torchrun)
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from ch15_kv_transfer import RECEIVER, SENDER, HostChannel, TransferBench, TransferWorkload

import aisp


def transfer_workload(w: TransferWorkload, requires: aisp.Requirements) -> TransferWorkload:
    # Ceiling: NVLink bytes, one way. The requests' K/V (256 MiB at the default size) live on the sender
    # and must cross to the receiver once: only the sender's links can carry them, so the bound is one
    # GPU's peer-copy rate (nvlink_one_way: 0.684 ms at 392.4 GB/s; before 2026-11-29 it was 2 x, which
    # capped the pair at 50%). The gather and scatter are not counted: a transport that reads and writes
    # the pages in place needs neither.
    return TransferWorkload(model=w.model, requests=w.requests, tokens=w.tokens, page_size=w.page_size,
                            chunk_bytes=w.chunk_bytes, items=w.nbytes(), item_unit="KV bytes", precision="exact",
                            bytes=float(w.nbytes()), link="nvlink_one_way", requires=requires,
                            ceiling_note="profiled (torch profiler, 2xH200): _chunksums 6 NCCL send/recv kernels 1.69 ms and "
                                         "gathers 0.16 in a 2.30 ms window under the profiler (timed 0.94)")


WORKLOAD = transfer_workload(TransferWorkload(), aisp.Requirements(gpus=2))
"""Throughput is in KV bytes/s."""


class HostBounce(TransferBench):
    workload = WORKLOAD

    def setup(self) -> None:
        super().setup()
        self.channel = HostChannel(self.workload.chunk_bytes, self.device)

    def teardown(self) -> None:
        self.channel.close()

    def run(self) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        chunks = self.staging.view(-1).view(torch.uint8).split(self.channel.slot)
        if self.rank == SENDER:
            self.gather()
        for i in range(len(chunks) + 1):
            if self.rank == SENDER and i < len(chunks):  # device -> host slot i % 2
                self.channel.slots(i)[:chunks[i].numel()].copy_(chunks[i], non_blocking=True)
            if self.rank == RECEIVER and i > 0:          # host slot (i - 1) % 2 -> device
                chunks[i - 1].copy_(self.channel.slots(i - 1)[:chunks[i - 1].numel()], non_blocking=True)
            if self.device.type == "cuda":
                torch.cuda.current_stream().synchronize()
            dist.barrier()  # chunk i is on the host and chunk i - 1 on the receiver: slots may flip
        if self.rank == RECEIVER:
            self.scatter()
        return self.output()


def get_benchmark() -> aisp.Benchmark:
    return HostBounce()


if __name__ == "__main__":
    aisp.main(get_benchmark)
