"""Baseline chunked prefill: a long prompt's prefill runs alone and stalls every running decode.

Baseline: 16 requests (1,024-token prompts) are decoding, 48 tokens each; before their 8th decode
step a 32,768-token prompt arrives and is prefilled in one forward, then decoding resumes. For the
length of that prefill (~22 TFLOP, attention's share included) no running request gets a token:
its time between tokens jumps from one decode step to one decode step plus the whole prefill.
Optimized (optimized_chunked_prefill.py): the prompt is prefilled in 2,048-token chunks, one chunk
in each of the next 16 decode steps (Sarathi-Serve, vLLM's chunked prefill): the chunk's tokens
and the 16 decode tokens share one forward's matmuls, so the weights are read once for both, and
no gap between decode steps is longer than one step carrying one chunk.
Headline: the p99 gap between decode steps (``metric:decode_gap_p99_ms``, from CUDA events between
steps), since chunking trades some total time for it; time is reported beside it.
Expect (measured, H200, 2026-11-26): p99 gap 32.95 -> 9.82 ms, 3.36x lower (estimated 2-3x); max gap
55.52 -> 9.83 ms, p50 3.62 -> 3.42 ms; total time 219.5 -> 242.6 ms, 10% slower (the chunks' fixed
cost per step). 17-18 of 20 samples of each ran under sw_power_cap (cv 21% and 16%). History: with
an 8,192-token prompt in 512-token chunks the p99 gap went 11.37 -> 8.08 ms (1.41x) on 2026-11-23,
then 7.74 -> 7.82 ms (0.99x) on 2026-11-26 once the kit's prefill took the flash path and shed host
work: the whole 8K prefill added only ~3 ms to one step, less than the fixed cost a chunk adds to
each of 16 steps; hence these sizes. Chunking pays where the prefill is long against a decode step.
Tolerance: tokens exactly (the kit's decoder keeps a wide greedy margin); the top-4 logits at the
bf16 defaults (chunks attend to earlier chunks through the cache instead of causal flash).
Run: python ch15/baseline_chunked_prefill.py  |  aisp bench run -t ch15:chunked_prefill
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch15_serving import GPU_SIZED, MODEL, StepClock, dtype_on, weight_bytes

import aisp
from aisp.kits.llm import TOP, DenseKVCache, LLMConfig, build_decoder, decode, greedy_top, prefill


@dataclass(frozen=True, kw_only=True)
class ChunkedWorkload(aisp.Workload):
    model: LLMConfig = MODEL
    """The decoder."""
    running: int = 16
    """Requests decoding when the long prompt arrives."""
    context: int = 1024
    """Prompt tokens of each running request."""
    steps: int = 48
    """Tokens each running request generates (the first from its prefill)."""
    long: int = 32768
    """Prompt tokens of the arriving request (a multiple of ``chunk``)."""
    arrive: int = 8
    """Decode step before which the long prompt arrives."""
    chunk: int = 2048
    """Prefill chunk (tokens per mixed step)."""


def _workload(w: ChunkedWorkload) -> ChunkedWorkload:
    assert w.long % w.chunk == 0 and w.arrive + w.long // w.chunk <= w.steps
    m = w.model
    flops = (m.forward_flops(w.running * w.context, w.context / 2) + m.forward_flops(w.long, w.long / 2)
             + m.forward_flops(w.running * (w.steps - 1), w.context + w.steps / 2))
    return ChunkedWorkload(flops=flops, bytes=(w.steps - 1) * weight_bytes(m), items=w.running * w.steps,
                           item_unit="tokens", precision="bf16", headline="metric:decode_gap_p99_ms",
                           requires=GPU_SIZED, iterations=10)


WORKLOAD = _workload(ChunkedWorkload())


class WholePrefill(aisp.Benchmark):
    """Returns the running requests' (tokens (running, steps), top logits (running, steps, TOP))
    and the long request's first token and top logits."""

    workload = WORKLOAD
    inputs = ("prompts", "long_prompt")

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        self.model = build_decoder(w.model, self.seed, self.device, dtype_on(self.device), draw_on_device=True)
        self.prompts = torch.randint(w.model.vocab, (w.running, w.context), generator=gen, device=self.device)
        self.long_prompt = torch.randint(w.model.vocab, (w.long,), generator=gen, device=self.device)
        self.clock = StepClock(self.device)

    def start(self) -> tuple[DenseKVCache, list[tuple[torch.Tensor, torch.Tensor]]]:
        """A cache with the running requests prefilled (rows 0..running-1; the long one: the last row)."""
        w = self.workload
        cache = DenseKVCache(w.model, w.running + 1, max(w.context + w.steps, w.long), self.device,
                             dtype_on(self.device))
        self.clock = StepClock(self.device)
        steps = [greedy_top(prefill(self.model, cache, list(self.prompts)), TOP)]
        self.clock.tick()
        return cache, steps

    def run(self) -> tuple[torch.Tensor, ...]:
        w = self.workload
        cache, steps = self.start()
        positions = torch.full((w.running,), w.context, device=self.device)
        for s in range(1, w.steps):
            if s == w.arrive:
                rows = torch.tensor([w.running], device=self.device)
                first = greedy_top(prefill(self.model, cache, [self.long_prompt], rows), TOP)
            steps.append(greedy_top(decode(self.model, cache, steps[-1][0], positions, w.context + s), TOP))
            self.clock.tick()
            positions = positions + 1
        return torch.stack([t for t, _ in steps], 1), torch.stack([v for _, v in steps], 1), *first

    def metrics(self) -> dict[str, float]:
        return self.clock.summary()


def get_benchmark() -> aisp.Benchmark:
    return WholePrefill()


if __name__ == "__main__":
    aisp.main(get_benchmark)
