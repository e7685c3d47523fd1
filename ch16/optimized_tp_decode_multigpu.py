"""Optimized TP decode (2 GPUs): the decoder split over two GPUs, Megatron-style; each step one
CUDA-graph replay, its all-reduces one-shot kernels over symmetric memory.

Baseline (baseline_tp_decode_multigpu.py): each GPU decodes the batch of 8 with the whole 2.24B
decoder, one graph replay per step reading 3.95 GB of weights (memory-bound).
Optimized: at setup each rank keeps its half of every block (``ch16_tp.ShardedDecoder``): 32 of the
64 query heads and the 4 K/V heads they read (QKV column-parallel, and its half of the KV cache),
the matching input columns of the attention output (row-parallel), half of the SwiGLU width (gate
and up column-parallel, down row-parallel); norms, embedding and LM head replicated. Each block
all-reduces its attention output and its MLP output (8 x 8192 bf16, 128 KB each) with
``aisp.kits.multirank.SymmetricReduce``: a copy into a symmetric-memory buffer and one one-shot kernel that
reads the peer's buffer over NVLink (P2P loads; multicast off). No NCCL call is in the step, so the
whole sharded step, its 4 all-reduces included, is one CUDA graph replay. Every rank computes the
same logits, so both pick the same tokens with no other collective. A rank reads 2.24 GB per step
instead of 3.95 GB: at best 1.76x, less the 4 all-reduces' latency (~10-20 us each).
Expect (measured, 2 x H200, 2026-11-26): 20.51 -> 15.06 ms, 1.36x [1.35, 1.37] (estimated 1.4-1.7x):
0.94 ms per step, 2.24 GB at 2.38 TB/s (57% of HBM); peak memory 4.54 -> 2.81 GB per GPU.
History (measured, 2 x H200, 2026-11-26): the eager NCCL version of this pair measured 0.79x [0.76,
0.82] against an eager baseline (2.8 -> 3.5 ms per step); a version capturing NCCL all-reduces in
the graph produced no output in 120 s (a process group that captured collectives can hang in
``destroy_process_group``, pytorch/pytorch#115388) and was reverted: symmetric memory keeps NCCL
out of the graph. On a CPU (gloo ranks, the tests) the all-reduces go through the process group.
Run: aisp bench run -t ch16:tp_decode_multigpu  (two GPUs; the harness starts two ranks under torchrun)
"""

from __future__ import annotations

import torch
from baseline_tp_decode_multigpu import ReplicaDecode
from ch16_tp import Reduce, Shard, nccl_reduce

import aisp
from aisp.kits.multirank import SymmetricReduce


class TensorParallelDecode(ReplicaDecode):
    shards = 2

    def reducer(self, shard: Shard, dtype: torch.dtype) -> Reduce:
        if self.device.type != "cuda":
            return nccl_reduce
        w = self.workload
        return SymmetricReduce(2 * w.model.layers, (w.batch, w.model.dim), dtype, self.device)


def get_benchmark() -> aisp.Benchmark:
    return TensorParallelDecode()


if __name__ == "__main__":
    aisp.main(get_benchmark)
