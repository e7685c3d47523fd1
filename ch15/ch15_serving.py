"""What chapter 15's pairs share: the decoder they serve and the request stream they serve it.

Every pair builds the kit's decoder (:mod:`aisp.kits.llm`: 8 layers, width 1024, 16 query heads on
4 K/V heads, 156M parameters, bf16 on a GPU / fp32 on a CPU) from the run's seed, and returns the
greedy tokens with each step's top logits (``Generated.as_tuple()``): tokens must match exactly,
logits within the bf16 tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

import aisp
from aisp.kits.llm import LLMConfig, Request, StreamConfig, build_decoder, request_stream

MODEL = LLMConfig(vocab=32000, dim=1024, layers=8, heads=16, kv_heads=4, ffn=2816)
GPU_SIZED = aisp.Requirements(cuda=True)
"""The pairs are sized for an H100/H200 (seconds per call there, minutes on a CPU); their logic runs
on a CPU at small sizes in tests/test_ch15_pairs.py."""


@dataclass(frozen=True, kw_only=True)
class StreamWorkload(aisp.Workload):
    model: LLMConfig = MODEL
    """The decoder served."""
    stream: StreamConfig = field(default_factory=StreamConfig)
    """The requests served in one run()."""
    slots: int = 8
    """Sequences decoded together (batch rows)."""
    stream_seed: int = 0
    """Seed of the stream's lengths, fixed so every run serves the same shapes (the run's seed
    draws the weights and the prompt tokens)."""

    def requests(self) -> list[Request]:
        return request_stream(self.stream, self.stream_seed)


class StreamBenchmark(aisp.Benchmark):
    """Builds the decoder and the stream; ``prompts`` (requests, longest prompt) is the per-call
    input (tokens drawn from the run's seed), and every request's prompt is a view of its row."""

    workload: StreamWorkload
    inputs = ("prompts",)

    def setup(self) -> None:
        w = self.workload
        self.model = build_decoder(w.model, self.seed, self.device, draw_on_device=True)
        stream = w.requests()
        longest = max(len(r.prompt) for r in stream)
        self.prompts = torch.randint(w.model.vocab, (len(stream), longest), generator=self.generator(),
                                     device=self.device)
        self.requests = [Request(r.rid, self.prompts[r.rid, :len(r.prompt)], r.output_len, r.arrival)
                         for r in stream]
