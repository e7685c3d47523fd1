"""Baseline speculative decoding: target-only greedy decode, one token per graphed target step.

Baseline: one 512-token prompt (batch 1: the latency case speculation is for) is prefilled, then
47 greedy decode steps run with a 3.1B-parameter target (16 blocks of a 7B-class layer: width 4096,
32 query heads on 8 K/V heads, SwiGLU 11,008; 32k vocabulary). Each step is one CUDA-graph replay
(``ch16_decode.GraphedDecode``, the decode_cuda_graph pair's optimization), so speculation is
measured against the best one-token-per-pass decode, not an eager one: every token reads the 5.9 GB
of block and head weights once, a memory-bound step (~1.4 ms at the HBM copy rate).
Optimized (optimized_speculative_decoding.py): per round a draft proposes 4 tokens and the target
verifies them in one forward over 5 positions; both are captured in one CUDA graph.
Expect (measured, H200, 2026-11-26): 137.0 -> 68.83 ms, 1.99x [1.96, 2.03] (estimated 1.6-2.2x);
the baseline streams its weights at ~2.0 TB/s (48.5% of HBM; a batch-1 step's ~480 small kernels
cost time beside the bytes). Declared bytes are the baseline's (weights once per token): the
speculative variant reads them once per 3.2 tokens, so its rate on them is 96.5% of HBM; passing
the one-token-per-pass ceiling is the technique's point.
History (measured, H200, 2026-11-26): the earlier design (156M-parameter target, eager steps, a
2-of-8-block draft) measured 0.97x [0.92, 1.02]: at batch 1 its steps were bound by host launches
and the 4 eager draft steps cost what the fewer target passes saved.
Tolerance: tokens exactly (verification keeps exactly the target's greedy tokens); the top-4
logits at the bf16 defaults (the target scores 5 positions at once instead of one).
Run: python ch16/baseline_speculative_decoding.py  |  aisp bench run -t ch16:speculative_decoding
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
from baseline_decode_cuda_graph import EagerDecode
from ch16_decode import GPU_SIZED, DecodeWorkload, GraphedDecode, dtype_on

import aisp
from aisp.kits.llm import DenseKVCache, LLMConfig, build_decoder
from aisp.kits.llm.serving import weight_bytes

TARGET = LLMConfig(vocab=32000, dim=4096, layers=16, heads=32, kv_heads=8, ffn=11008)


@dataclass(frozen=True, kw_only=True)
class SpecWorkload(DecodeWorkload):
    propose: int = 4
    """Draft tokens proposed per round (k)."""
    draft_layers: int = 1
    """Target blocks the draft runs (its first ones)."""
    draft_miss: float = 0.2
    """Share of the draft head's rows shuffled among themselves (the draft's disagreement)."""


def speculative_bytes(w: SpecWorkload) -> float:
    """The least bytes the speculative design reads for the call's tokens: a target pass verifies at
    most ``propose + 1`` of them, so the ``steps - 1`` after the prefill take at least that many rounds
    (10; the draft's measured acceptance took 15), each reading the target's weights once and the
    draft's (its first blocks and head) ``propose`` times, and the live cache once a round."""
    rounds = math.ceil((w.steps - 1) / (w.propose + 1))
    draft = weight_bytes(replace(w.model, layers=w.draft_layers))
    cache = w.step_bytes() - (w.steps - 1) * weight_bytes(w.model)  # the cache every one-token step reads
    return rounds * (weight_bytes(w.model) + w.propose * draft) + cache * rounds / (w.steps - 1)


def _workload() -> SpecWorkload:
    w = SpecWorkload(model=TARGET, batch=1, prompt=512, steps=48)
    # Ceiling: the speculative design's bytes (speculative_bytes), not one target pass a token: passing
    # that is the technique's point (the stored optimized read 104% of it).
    return SpecWorkload(model=w.model, batch=w.batch, prompt=w.prompt, steps=w.steps, flops=w.step_flops(),
                        bytes=speculative_bytes(w), items=w.batch * w.steps, item_unit="tokens", precision="bf16",
                        requires=GPU_SIZED, ceiling_note="profiled (torch profiler, H200): GPU busy 69% of 84.9 ms, "
                                                         "8,335 kernels (80% < 10 us), 20 ms of host gaps; 15 rounds at 64% acceptance")


WORKLOAD = _workload()


class TargetOnly(EagerDecode):
    """Prefill, then ``steps - 1`` graphed target steps."""

    workload: SpecWorkload = WORKLOAD

    def setup(self) -> None:
        w = self.workload
        big = self.device.type == "cuda"
        self.model = build_decoder(w.model, self.seed, self.device, dtype_on(self.device), draw_on_device=big)
        self.prompts = torch.randint(w.model.vocab, (w.batch, w.prompt), generator=self.generator(),
                                     device=self.device)
        self.cache = DenseKVCache(w.model, w.batch, self.cache_len(), self.device, dtype_on(self.device))
        self.cache_k, self.cache_v = self.cache.k, self.cache.v
        self.build_steps()

    def cache_len(self) -> int:
        return self.workload.prompt + self.workload.steps + self.workload.propose

    def build_steps(self) -> None:
        self.step = GraphedDecode(self.model, self.cache, self.workload.batch, self.cache_len())

    def run(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.step.generate(*self.first_token(), self.workload.prompt, self.workload.steps)


def get_benchmark() -> aisp.Benchmark:
    return TargetOnly()


if __name__ == "__main__":
    aisp.main(get_benchmark)
