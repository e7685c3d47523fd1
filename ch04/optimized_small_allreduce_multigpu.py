"""Optimized small all-reduce (2 GPUs): symmetric-memory one-shot all-reduce, P2P loads over NVLink.

Baseline (baseline_small_allreduce_multigpu.py): 16 NCCL all-reduces of 64 KB; each pays NCCL's
fixed latency.
Optimized: each of the 16 layers' tensors lives in a buffer from ``torch.distributed.
_symmetric_memory.empty`` that every rank mapped once (``rendezvous``, in setup). Per layer: the
copy into it, then ``torch.ops.symm_mem.one_shot_all_reduce_out``: one kernel that meets the
peers at a barrier in the buffers' signal pads, loads every peer's buffer over NVLink (P2P, plain
loads: no NVLink multicast, which stays off here, ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1``), sums
and writes the output. No proxy thread, no protocol setup: one launch and one barrier.
The one-shot kernel runs with multicast off (2 x H200; were it to refuse, the pair would end as an
error with that message).
Expect (measured, 2 x H200, 2026-11-26): 0.7291 -> 0.3666 ms, 2.03x [1.89, 2.18] (estimated 1.3-2x).
Run: aisp bench run -t ch04:small_allreduce_multigpu
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem
from baseline_small_allreduce_multigpu import NcclAllReduces

import aisp


class OneShotAllReduces(NcclAllReduces):
    scratch = ("bufs", "out")

    def setup(self) -> None:
        super().setup()
        self.group = dist.group.WORLD.group_name
        self.bufs = [symm_mem.empty(self.workload.numel, dtype=torch.bfloat16, device=self.device)
                     for _ in range(self.workload.count)]
        for buf in self.bufs:
            symm_mem.rendezvous(buf, self.group)

    def run(self) -> torch.Tensor:
        for row, buf, out in zip(self.x, self.bufs, self.out, strict=True):
            buf.copy_(row)
            torch.ops.symm_mem.one_shot_all_reduce_out(buf, "sum", self.group, out)
        return self.out


def get_benchmark() -> aisp.Benchmark:
    return OneShotAllReduces()


if __name__ == "__main__":
    aisp.main(get_benchmark)
