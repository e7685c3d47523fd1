"""Optimized TP decode (2 GPUs): the decoder split over two GPUs, Megatron-style, eager over NCCL.

Baseline (baseline_tp_decode_multigpu.py): each GPU decodes the batch of 8 with the whole 2.24B
decoder (3.95 GB of weights per step), eagerly.
Optimized: at setup each rank keeps its half of every block (``ch16_tp.ShardedDecoder``): 32 of the
64 query heads and the 4 K/V heads they read (QKV column-parallel, and its half of the KV cache),
the matching input columns of the attention output (row-parallel), half of the SwiGLU width (gate
and up column-parallel, down row-parallel); norms, embedding and LM head replicated. Each block
all-reduces its attention output and its MLP output (8 x 8192 bf16, 128 KB each, NCCL over NVLink)
and every rank computes the same logits, so both ranks pick the same tokens with no other
collective. A rank reads 2.24 GB per step instead of 3.95 GB.
Expect (measured, 2 x H200, 2026-11-26): SLOWER, 44.74 -> 56.59 ms, 0.79x [0.76, 0.82] (estimated
1.0-1.2x, possibly below 1): 2.8 -> 3.5 ms per eager decode step. The step is launch-bound (as
decode_cuda_graph's eager step, measured, H200, 2026-11-26: 4.49x from a graph), so halving each
GPU's weight bytes does not show, and the 4 all-reduces per step add their latency (baseline
header). Next: capture the sharded step, all-reduces included, in a CUDA graph (NCCL >= 2.9 supports
capture; PyTorch's NCCL process group skips its watchdog bookkeeping while capturing): estimated
1.5-1.7x. A first graphed variant produced no output within 120 s on 2 x H200 (a hang in capture or
teardown, not diagnosed; a process group that captured collectives can hang in
``destroy_process_group``, pytorch/pytorch#115388, which the harness calls after every multi-rank
pair) and was reverted.
Run: aisp bench run -t ch16:tp_decode_multigpu  (two GPUs; the harness starts two ranks under torchrun)
"""

from __future__ import annotations

from baseline_tp_decode_multigpu import ReplicaDecode

import aisp


class TensorParallelDecode(ReplicaDecode):
    shards = 2


def get_benchmark() -> aisp.Benchmark:
    return TensorParallelDecode()


if __name__ == "__main__":
    aisp.main(get_benchmark)
