"""Optimized TP decode (2 GPUs), fused: the 2-way split of ``optimized_tp_decode_multigpu.py`` with a
vocab-parallel LM head, ~28 kernels a step instead of ~107, and the call's 16 steps in one CUDA graph.

Baseline (baseline_tp_decode_multigpu.py): each GPU decodes the batch of 8 with the whole 2.24B
decoder, one graph replay per step reading 3.95 GB of weights (memory-bound).
Optimized: each rank keeps ``ch16_tp.ShardedDecoder``'s half of every block (heads, SwiGLU width) and
half of the LM head's rows (16,000 of the 32,000 tokens): a rank reads 1.97 GB a step (2.24 GB in
the unfused variant, whose replicated head is 0.26 GB of it), the 3.95 GB the ceiling counts split
evenly. The step is ``ch16_tp_fused.FusedTPDecode``: cuBLAS GEMMs on the shard's weights (the
row-parallel ones write straight into a symmetric-memory buffer), and around them 5 kernel kinds in
place of ~80 small aten kernels (the profile's 4.9 ms of non-GEMM time: cuDNN attention 0.91, norms
0.83, ~2.6 elementwise/index): residual + all-reduced partial + RMSNorm in one kernel, RoPE + cache
write in one, flash-decoding to each row's position (no mask) and its merge, SwiGLU in one. Each
rank writes its half of the logits into a zeroed buffer; a fifth one-shot all-reduce a step gives
both ranks the whole logits exactly (x + 0), then one kernel takes the top 4 and the token and feeds
it back. The 16 steps are one graph replay (no per-step launch or output copies).
Expect (measured, 2 x H200, 2026-11-29, two runs of 20 samples): 10.16 / 10.05 ms against the
unfused 14.83 / 14.65 in the same runs (1.46x), 75-76% of the 7.66 ms ceiling (estimated 9.2-10.4
ms, 74-83%; 80% needs <= 9.58 ms).
Tolerance: as the pair's (tokens exactly, top-4 logits at the bf16 defaults): the kernels round where
the eager step rounds, RoPE in bf16 (the kit's ``rotate_``, not the fp32 ``apply_rope``), attention
products in fp16 (``ch16_fused_decode._attend``).
Run: aisp bench run -t ch16:tp_decode_multigpu  (two GPUs; the harness starts two ranks under torchrun)
"""

from __future__ import annotations

import torch
from baseline_tp_decode_multigpu import ReplicaDecode
from ch16_tp import Shard
from ch16_tp_fused import FusedTPDecode

import aisp
from aisp.kits.llm import TOP


class FusedTensorParallelDecode(ReplicaDecode):
    shards = 2

    def make_step(self, shard: Shard) -> FusedTPDecode:
        w = self.workload
        return FusedTPDecode(self.model, self.cache, shard, w.batch, w.prompt + w.steps, w.steps - 1, TOP)

    def run(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.step.generate(self.first, self.workload.prompt)


def get_benchmark() -> aisp.Benchmark:
    return FusedTensorParallelDecode()


if __name__ == "__main__":
    aisp.main(get_benchmark)
