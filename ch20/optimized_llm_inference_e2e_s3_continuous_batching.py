"""Optimized LLM inference, stage 3 of 4: continuous batching (ch15: continuous_batching) on the
graphed decode step.

Baseline (baseline_llm_inference_e2e.py): recompute decode. Stages 1-2 added a KV cache and a
CUDA-graphed decode step, but batches are still static: a batch decodes until its longest
output is done, so finished rows keep stepping as padding (~130 steps for the stream).
Optimized: stage 2 with iteration-level scheduling: before each graphed step, free slots take the
next waiting requests (prefilled into those cache rows, eagerly), and a request that produced its
last token leaves its slot (the kit's ``ContinuousBatcher`` with its decode forward replaced by a
replay: ``GraphedBatcher``). Every step carries up to 8 live requests: ~60 steps at least.
Expect (estimated, not yet measured, H200): ~1.4x over stage 2 (~45 ms per call): fewer steps,
but each admission pays its own eager prefill.
Run: python ch20/optimized_llm_inference_e2e_s3_continuous_batching.py  |  aisp bench run -t ch20:llm_inference_e2e
"""

from __future__ import annotations

import torch
from ch20_decode_graph import GraphedBatcher
from optimized_llm_inference_e2e_s2_cuda_graph import GraphedStaticDecode

import aisp


class ContinuousGraphedDecode(GraphedStaticDecode):
    def run(self) -> tuple[torch.Tensor, torch.Tensor]:
        return GraphedBatcher(self.model, self.step, self.workload.slots).run(self.requests).as_tuple()


def get_benchmark() -> aisp.Benchmark:
    return ContinuousGraphedDecode()


if __name__ == "__main__":
    aisp.main(get_benchmark)
