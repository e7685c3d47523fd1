"""Optimized LLM inference, stage 4 of 4: continuous batching with batched admissions (ch15:
continuous_batching) on the graphed fp8 decode step.

Baseline (baseline_llm_inference_e2e.py): recompute decode. Stages 1-3 added a KV cache, a
CUDA-graphed decode step and fp8 weights, but batches are still static: a batch decodes until
its longest output is done, so finished rows keep stepping as padding (128 steps for the stream).
Optimized: stage 3 with iteration-level scheduling: a request that produced its last token leaves
its slot, and once half the slots (4) are free, or nothing is running, the free slots take the next
waiting requests, prefilled together in one forward (the kit's ``ContinuousBatcher``, its decode a
replay of the fp8 graph: ``GraphedBatcher``; ``min_admit`` is a waiting-served threshold). 97 steps
and 4 admission prefills of 4 requests, where admitting at every free slot (the 2026-11-26 s3)
took 97 steps and 15 prefills, ~3 ms each, and lost to static batches (126.5 vs 112.4 ms).
Expect (measured, H200, 2026-11-27): 101.1 ms, 4.77x [4.72, 4.81] over the baseline, 1.05x over
stage 3, cv 0.023; 13.8% of HBM (estimated ~1.1x, ~82 ms): 31 fewer steps (~23 ms of graphed
steps) bought ~5.5 ms; the 2 extra, batched admission prefills and host bookkeeping took the rest.
Run: python ch20/optimized_llm_inference_e2e_s4_continuous_batching.py  |  aisp bench run -t ch20:llm_inference_e2e
"""

from __future__ import annotations

import torch
from ch20_decode_graph import GraphedBatcher
from optimized_llm_inference_e2e_s3_fp8_weights import FP8StaticDecode

import aisp


class ContinuousFP8Decode(FP8StaticDecode):
    def run(self) -> tuple[torch.Tensor, torch.Tensor]:
        slots = self.workload.slots
        return GraphedBatcher(self.model, self.step, slots, min_admit=max(1, slots // 2)).run(self.requests).as_tuple()


def get_benchmark() -> aisp.Benchmark:
    return ContinuousFP8Decode()


if __name__ == "__main__":
    aisp.main(get_benchmark)
