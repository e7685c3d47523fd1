"""Optimized context parallelism, priority variant: the ring's K/V exchange beside the attention, not after it.

Baseline (baseline_context_parallel_multigpu.py): all-gather K and V, concatenate, one fused
attention call (cuDNN on an H200) over the whole sequence; the gather is exposed.
Optimized: optimized_context_parallel_multigpu.py's ring (the send/recv of the next K/V block posted
before the attention on the block the rank holds, waited for only before the next block's attention),
with two changes. (1) The blocks travel on a communicator of their own whose NCCL stream has high
priority (``priority_group``, made in setup, destroyed in teardown). Profiled on 2 x H200 (2026-11-29), the ring's
send/recv kernel ran between the two attention blocks, not beside them; the likely cause: the cuDNN
kernel's blocks fill the SMs, and a kernel of equal priority gets SMs only once the attention's last
blocks are dispatched. At high priority its blocks go first whenever an SM slot frees, so the 64 MiB
(K and V) a rank sends cross NVLink while the first block computes. (2) The merge is one Triton kernel
(``context_parallel_merge``, in place) instead of five PyTorch ops.
Expect: measured, 2 x H200, 2026-11-29 (two runs of 20 samples): 1.226 and 1.187 ms median (min 1.117,
1.104) against the ring's 1.252 and 1.222: 2-3% faster, 57-59% of the 0.70 ms bf16 ceiling (the
estimate was 0.88-0.94 ms, 74-80%, or ~1.17 ms if the send/recv still could not get SMs beside the
attention: the second case). Its profile: attention 0.83-0.86 ms a rank, send/recv 0.27, merge 0.025.
Tolerance: bf16 defaults, as the ring (the merge in fp32, rounded once).
Run: aisp bench run -t ch13:context_parallel_multigpu  (two GPUs; the harness starts torchrun)
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from context_parallel_common import priority_group, ring_attention
from context_parallel_merge import fused_merge
from optimized_context_parallel_multigpu import RingAttention

import aisp


class PriorityRingAttention(RingAttention):
    def setup(self) -> None:
        super().setup()
        self.group = priority_group()

    def teardown(self) -> None:
        if self.group is not None:
            dist.destroy_process_group(self.group)
        self.group = None
        super().teardown()

    def run(self) -> torch.Tensor:
        return ring_attention(self.q, self.k, self.v, self.buffers, group=self.group, merge_block=fused_merge)


def get_benchmark() -> aisp.Benchmark:
    return PriorityRingAttention()
