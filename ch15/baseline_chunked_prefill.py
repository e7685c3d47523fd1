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
from ch15_serving import GPU_SIZED

import aisp
from aisp.kits.llm import TOP, decode, greedy_top, prefill
from aisp.kits.llm.serving import LongPromptArrival, LongPromptWorkload


@dataclass(frozen=True, kw_only=True)
class ChunkedWorkload(LongPromptWorkload):
    steps: int = 48
    """Tokens each running request generates (the first from its prefill)."""
    arrive: int = 8
    """Decode step before which the long prompt arrives (then one ``chunk``-token chunk per step)."""


WORKLOAD = ChunkedWorkload(**ChunkedWorkload().accounting(), requires=GPU_SIZED, iterations=10,
                           ceiling_note="profiled (torch profiler, H200): chunks' FA2 attention 61 ms of 124.5 ms of kernels "
                                        "(baseline's attention 46 ms in all); GPU busy 24% under the profiler")


class WholePrefill(LongPromptArrival):
    """Returns the running requests' (tokens (running, steps), top logits (running, steps, TOP))
    and the long request's first token and top logits."""

    workload = WORKLOAD
    draw_on_device = True

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
        return self.outputs(steps, first)


def get_benchmark() -> aisp.Benchmark:
    return WholePrefill()


if __name__ == "__main__":
    aisp.main(get_benchmark)
