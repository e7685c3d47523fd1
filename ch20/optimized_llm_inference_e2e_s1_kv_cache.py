"""Optimized LLM inference, stage 1 of 4: a KV cache (technique from ch15: kv_cache_reuse).

Baseline (baseline_llm_inference_e2e.py): static batches of 8; every decode step reruns the model
over the whole padded sequence (~2 TFLOP per step).
Optimized: the same static batches with the kit's ``DenseKVCache`` (reserved per call for the
longest prompt + output): one prefill writes every prompt's keys/values, then each decode step runs
one token per row and attends to the cache (the kit's ``static_generate``). A step now costs one
read of the 1.68 GB of weights plus the live cache, and ~200 eager kernel launches.
Expect (measured, H200, 2026-11-26): 320.8 ms, 1.42x [1.31, 1.53] over the baseline, cv 0.11
(estimated ~4x): 128 eager steps at ~2.4 ms, bound by the host's launches and the per-call cache.
Noisy: 393.3 ms (cv 0.145, 1.22x [0.97, 1.53]) in the 2026-11-27 run.
Run: python ch20/optimized_llm_inference_e2e_s1_kv_cache.py  |  aisp bench run -t ch20:llm_inference_e2e
"""

from __future__ import annotations

import torch
from baseline_llm_inference_e2e import RecomputeDecode
from ch20_llm import dtype_on

import aisp
from aisp.kits.llm import DenseKVCache, static_generate


class KVCacheDecode(RecomputeDecode):
    def run(self) -> tuple[torch.Tensor, torch.Tensor]:
        w = self.workload
        cache = DenseKVCache(w.model, w.slots, w.cache_len(), self.device, dtype_on(self.device))
        return static_generate(self.model, cache, self.requests, w.slots).as_tuple()


def get_benchmark() -> aisp.Benchmark:
    return KVCacheDecode()


if __name__ == "__main__":
    aisp.main(get_benchmark)
