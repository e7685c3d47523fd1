"""Optimized context parallelism (2 GPUs), pulled: the peer's K/V copied by the copy engines beside the attention.

Baseline (baseline_context_parallel_multigpu.py): all-gather K and V, concatenate, one fused
attention call (cuDNN on an H200) over the whole sequence; the gather is exposed.
Optimized: the ring's two blocks (own K/V, then the peer's) and its one-kernel merge
(``context_parallel_merge``, as the ``_priority`` variant), with the transfer taken off the SMs.
Profiled on 2 x H200 (2026-11-29), both NCCL rings ran their send/recv kernel (0.27 ms) between
the two attention blocks, not beside them: cuDNN's blocks hold the SMs, even against a
high-priority NCCL stream. Here each rank's K and V live in one symmetric-memory block
(``torch.distributed._symmetric_memory``, mapped by both ranks in setup; the inputs are made there,
so the refilled inputs are what the peer reads, and no call copies them, as the ring sends from
them in place). Per call: a barrier (both ranks' K/V written; on the main stream, ahead of the
attention, whose blocks would keep a barrier kernel beside them waiting for an SM), then on a
high-priority side stream a copy-engine pull (``copy_`` from the peer's mapping: one 64 MiB cudaMemcpyAsync over NVLink, no SMs,
no NCCL kernel) of the peer's K/V into this rank's inbox, while the SMs run the attention over the
own block; the main stream waits on the pull's event, runs the second block and the merge. A second
barrier on the side stream, after the pull (both ranks done reading each other's K/V), is waited
for at the end of the call: no rank returns, and no refill rewrites its K/V, while the peer reads it.
On gloo (the CPU tests), one rank or more than two: the ring with the one-kernel merge.
Expect: 0.911 / 0.919 ms on 2 x H200 (2026-11-30), 76-77% of the ceiling; _priority 1.144.
Estimated before: the pull, 67.1 MB at the ~380
GB/s a direction both H200s keep when copying at once, takes ~0.18 ms (0.25 ms if it runs at ch04's
pulled gradients' slower rate), under the first block's ~0.42 ms; the call is then the two blocks
0.83-0.86 ms + the merge 0.025 ms + the first barrier and gaps ~0.01-0.05 ms = 0.87-0.94 ms, 75-81%
of the 0.7018 ms ceiling (80% needs <= 0.877 ms), against the _priority variant's 1.19 ms.
Tolerance: bf16 defaults, as the ring (the same two blocks, merged in fp32 and rounded once).
Run: aisp bench run -t ch13:context_parallel_multigpu  (two GPUs; the harness starts torchrun)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from context_parallel_common import block_attention, make_shard, ring_attention, ring_buffers
from context_parallel_merge import fused_merge
from optimized_context_parallel_multigpu import RingAttention

import aisp
from aisp.kits.multirank import peer_view, world_and_rank


@dataclass
class Link:
    """The exchange's state, held outside tensor attributes: the harness's input guard must neither
    snapshot nor poison the symmetric block (its inbox half changes every call) or the peer's mapping."""

    handle: object
    remote: torch.Tensor  # the peer's [K, V], mapped here
    side: torch.cuda.Stream  # high priority: its barrier gets the first SM that frees
    pulled: torch.cuda.Event


class PulledRingAttention(RingAttention):
    scratch = ("buffers", "inbox")

    def setup(self) -> None:
        self.q, self.k, self.v = make_shard(self)
        self.link = None
        if world_and_rank()[0] != 2 or dist.get_backend() != "nccl":  # gloo, one rank, > 2: the ring
            self.buffers = ring_buffers(self.k, self.v)
            return
        import torch.distributed._symmetric_memory as symm_mem

        # [0]: this rank's K and V (the inputs, in place); [1]: the peer's, pulled each call
        block = symm_mem.empty((2, 2, *self.k.shape), dtype=self.k.dtype, device=self.device)
        handle = symm_mem.rendezvous(block, dist.group.WORLD.group_name)
        block[0, 0].copy_(self.k)
        block[0, 1].copy_(self.v)
        self.k, self.v, self.inbox, self.buffers = block[0, 0], block[0, 1], block[1], []
        self.link = Link(handle, peer_view(handle, block, 1 - handle.rank)[0],
                         torch.cuda.Stream(self.device, priority=-1), torch.cuda.Event())
        torch.cuda.synchronize(self.device)

    def run(self) -> torch.Tensor:
        link = self.link
        if link is None:
            return ring_attention(self.q, self.k, self.v, self.buffers, merge_block=fused_merge)
        main = torch.cuda.current_stream()
        link.handle.barrier(channel=0)  # both ranks' K/V written (a refill included)
        link.side.wait_stream(main)
        with torch.cuda.stream(link.side):
            self.inbox.copy_(link.remote)  # copy engine, over NVLink, beside the first block
            link.pulled.record(link.side)
            link.handle.barrier(channel=0)  # both ranks done reading each other's K/V
        out, lse = block_attention(self.q, self.k, self.v)
        main.wait_event(link.pulled)
        out, _ = fused_merge(out, lse, *block_attention(self.q, self.inbox[0], self.inbox[1]))
        main.wait_stream(link.side)  # the second barrier inside the call
        return out


def get_benchmark() -> aisp.Benchmark:
    return PulledRingAttention()
