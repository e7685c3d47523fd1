"""What the ``llm_inference_e2e`` stages share: the decoder, the request stream, their accounting
and the benchmark that builds them (the graphed decode step is in ``ch20_decode_graph.py``).

The decoder and the loops are the serving kit's (:mod:`aisp.kits.llm`): a Llama-shaped decoder
(4 blocks of width 4096, 32 query heads on 8 K/V heads, SwiGLU 11,008, 32k vocabulary: 0.84B
parameters besides the embedding, 1.68 GB of bf16 weights read per decode step).
Every stage returns the greedy tokens and each step's top-4 logits (``Generated.as_tuple()``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

import aisp
from aisp.kits.llm import LLMConfig, Request, StreamConfig, build_decoder, request_stream

MODEL = LLMConfig(vocab=32000, dim=4096, layers=4, heads=32, kv_heads=8, ffn=11008)
STREAM = StreamConfig(requests=24, prompt_mean=64, output_mean=16, spread=0.7, max_prompt=192, max_output=64)


def dtype_on(device: torch.device) -> torch.dtype:
    return torch.bfloat16 if device.type == "cuda" else torch.float32


@dataclass(frozen=True, kw_only=True)
class E2EWorkload(aisp.Workload):
    model: LLMConfig = MODEL
    """The decoder served."""
    stream: StreamConfig = field(default_factory=lambda: STREAM)
    """The requests served in one run()."""
    slots: int = 8
    """Sequences decoded together (batch rows, KV cache rows)."""
    stream_seed: int = 0
    """Seed of the stream's lengths (the run's seed draws the weights and the prompt tokens)."""

    def requests(self) -> list[Request]:
        return request_stream(self.stream, self.stream_seed)

    def cache_len(self) -> int:
        return self.stream.max_prompt + self.stream.max_output

    def static_steps(self) -> int:
        """Decode steps of static batches: each batch steps until its longest output is done."""
        reqs = self.requests()
        return sum(max(r.output_len for r in reqs[i:i + self.slots]) - 1 for i in range(0, len(reqs), self.slots))

    def fewest_steps(self) -> int:
        """Decode steps with every slot busy: the fewest that serve the stream."""
        return math.ceil(sum(r.output_len - 1 for r in self.requests()) / self.slots)


def weight_bytes(cfg: LLMConfig, itemsize: float) -> float:
    """Bytes of weights one decode step reads (the embedding only for its rows: excluded)."""
    return itemsize * (cfg.params() - cfg.vocab * cfg.dim)


def e2e_workload(**kw: object) -> E2EWorkload:
    """The workload with its accounting: FLOPs of one prefill per request plus one decode token per
    output token (the work a KV cache leaves); bytes: the fp8 weights read by the fewest decode steps
    (the last stage's HBM floor; each stage's GB/s is then its share of that floor's rate)."""
    w = E2EWorkload(**kw)
    reqs, m = w.requests(), w.model
    prefill_flops = sum(m.prefill_flops(len(r.prompt), len(r.prompt) / 2) for r in reqs)
    decode_flops = sum(m.forward_flops(r.output_len - 1, len(r.prompt) + r.output_len / 2) for r in reqs)
    return E2EWorkload(**kw, flops=prefill_flops + decode_flops, bytes=w.fewest_steps() * weight_bytes(m, 1.0),
                       items=sum(r.output_len for r in reqs), item_unit="tokens")


class ServeStream(aisp.Benchmark):
    """Builds the decoder and the stream; ``prompts`` (requests, longest prompt) is the per-call
    input, and each request's prompt is a view of its row."""

    workload: E2EWorkload
    inputs = ("prompts",)

    def setup(self) -> None:
        w = self.workload
        self.model = build_decoder(w.model, self.seed, self.device, dtype_on(self.device),
                                   draw_on_device=self.device.type == "cuda")
        stream = w.requests()
        self.prompts = torch.randint(w.model.vocab, (len(stream), max(len(r.prompt) for r in stream)),
                                     generator=self.generator(), device=self.device)
        self.requests = [Request(r.rid, self.prompts[r.rid, :len(r.prompt)], r.output_len, r.arrival)
                         for r in stream]
        self.prepare()

    def prepare(self) -> None:
        """Untimed, after the model and stream exist: weights converted, caches reserved, graphs captured."""
