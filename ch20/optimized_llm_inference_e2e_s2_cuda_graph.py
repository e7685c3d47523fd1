"""Optimized LLM inference, stage 2 of 4: static cache + CUDA-graphed decode step (ch16:
decode_cuda_graph; graphs from ch12).

Baseline (baseline_llm_inference_e2e.py): recompute decode. Stage 1 added a KV cache; its eager
decode step is ~200 kernel launches (~6 us each on the host) for ~0.4 ms of HBM work.
Optimized: stage 1 plus the cache reserved once at setup (a static address and shape) and the
decode step captured in a CUDA graph over static buffers (``GraphedDecode``): token and position
in, greedy token and top-4 logits out, attention over all 256 cache slots (masked after each
row's position). Each step is one replay: the GPU starts each kernel in ~1.2 us and the host
issues one call. The prefills stay eager (one forward per batch).
Expect (measured, H200, 2026-11-26): 112.4 ms, 4.26x [4.26, 4.27] over the baseline, 2.85x over
stage 1 (estimated ~1.8x over stage 1): ~0.75 ms a step for 128 steps plus 3 prefills.
Run: python ch20/optimized_llm_inference_e2e_s2_cuda_graph.py  |  aisp bench run -t ch20:llm_inference_e2e
"""

from __future__ import annotations

import torch
from baseline_llm_inference_e2e import RecomputeDecode
from ch20_decode_graph import GraphedDecode, graphed_static
from ch20_llm import dtype_on

import aisp
from aisp.kits.llm import DenseKVCache


class GraphedStaticDecode(RecomputeDecode):
    state = ("cache_k", "cache_v")

    def prepare(self) -> None:
        w = self.workload
        self.convert()
        self.cache = DenseKVCache(w.model, w.slots, w.cache_len(), self.device, dtype_on(self.device))
        self.cache_k, self.cache_v = self.cache.k, self.cache.v
        self.step = GraphedDecode(self.model, self.cache, w.slots, w.cache_len())

    def convert(self) -> None:
        """Model-load-time weight conversion before capture (none in bf16)."""

    def run(self) -> tuple[torch.Tensor, torch.Tensor]:
        return graphed_static(self.model, self.step, self.requests, self.workload.slots).as_tuple()


def get_benchmark() -> aisp.Benchmark:
    return GraphedStaticDecode()


if __name__ == "__main__":
    aisp.main(get_benchmark)
