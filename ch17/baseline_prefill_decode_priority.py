"""Baseline prefill/decode priority: a long prefill and the running decodes share one CUDA stream.

Baseline: 16 requests (1,024-token contexts) are decoding, 32 tokens each; before their 4th decode
step a 32,768-token prompt arrives and its prefill (~22 TFLOP) is issued on the same stream as the
decode steps, as one forward. A stream runs in order: every decode step issued after the prefill
waits for all of it, so the gap between two decode steps (the running requests' time per output
token) jumps from one step to one step plus the whole prefill, ~30 ms.
Optimized (optimized_prefill_decode_priority.py): decode steps on a high-priority stream, the prefill
on a low-priority stream in 2,048-token chunks, one chunk issued beside each decode step. The two
streams run concurrently; when a prefill thread block retires, the block scheduler issues the
pending decode blocks first, so a decode step waits for at most one wave of prefill blocks, never
for the prefill. Variants: ``_chunked`` (chunks interleaved on one shared stream, no priority: each
gap holds one chunk) and ``_whole`` (priority streams, the prefill unchunked), to tell the two
effects apart. Unlike ch15:chunked_prefill, the chunk never shares a forward with the decode rows.
Headline: the p99 gap between decode steps (``metric:decode_gap_p99_ms``; CUDA events recorded on
the decode steps' stream); the time of the whole call is reported beside it.
Expect (measured, H200, 2026-11-27): p99 decode gap 40.67 -> 8.26 ms, 4.92x (main variant;
``_whole`` 8.59 ms, ``_chunked`` 12.67 ms); call 146.1 -> 167.8 ms (``_whole`` 114.7 ms).
Earlier (H200, 2026-11-26): p99 decode gap 42.1 -> 13.41 ms, 3.14x (``_chunked``; main
variant 15.04 ms, 2.80x; ``_whole`` 13.85 ms, 3.04x) (estimated ~30 -> 5-8 ms, 4-6x). The call gets
slower: 155.5 -> 193.6 ms (``_chunked``), 197.2 ms (main); ``_whole`` 123.7 ms. The p99 gap stays ~3.8x
an undisturbed step (the baseline's p50 gap, 3.53 ms); p50 gaps grow (main 7.62 ms).
Tolerance: tokens exactly; top-4 logits at the bf16 defaults (chunks attend to earlier chunks
through the cache, the whole prefill causally over itself).
Run: python ch17/baseline_prefill_decode_priority.py  |  aisp bench run -t ch17:prefill_decode_priority
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch17_serving import GPU_SIZED

import aisp
from aisp.kits.llm import TOP, DenseKVCache, decode, greedy_top
from aisp.kits.llm.serving import LongPromptArrival, LongPromptWorkload


@dataclass(frozen=True, kw_only=True)
class PriorityWorkload(LongPromptWorkload):
    """Chapter 15's decoder; the long prompt arrives before the 4th of 32 decode steps."""


def priority_workload(**kw: object) -> PriorityWorkload:
    return PriorityWorkload(**kw, **PriorityWorkload(**kw).accounting(), requires=GPU_SIZED)


WORKLOAD = priority_workload(
    ceiling_note="profiled (torch profiler, H200): _whole: 87 ms of kernels (cuDNN attention 50%, mostly the 32K prefill's), "
                 "GPU busy 29% of 291 ms under the profiler")


class SharedStream(LongPromptArrival):
    """Returns the running requests' tokens (running, steps) and top logits (running, steps, TOP),
    and the long request's first token and top logits."""

    workload: PriorityWorkload = WORKLOAD

    def setup(self) -> None:
        super().setup()
        self.long_row = torch.full((1,), self.workload.running, device=self.device)  # the long request's cache row

    def prefill_long(self, cache: DenseKVCache, start: int, end: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Prefill tokens start..end of the long prompt into its cache row (attending to the earlier
        ones through the cache); its first token and top logits once ``end`` is the prompt's end."""
        pos = torch.arange(start, end, device=self.device)[None]
        bound = cache.bind(pos, end, self.long_row, fresh=start == 0, tail=start > 0)
        hidden = self.model.hidden(self.long_prompt[None, start:end], pos, bound)
        return greedy_top(self.model.head(hidden[:, -1]), TOP) if end == self.workload.long else None

    def decode_step(self, cache: DenseKVCache, steps: list, positions: torch.Tensor, s: int) -> None:
        steps.append(greedy_top(decode(self.model, cache, steps[-1][0], positions, self.workload.context + s), TOP))
        self.clock.tick()

    def run(self) -> tuple[torch.Tensor, ...]:
        w = self.workload
        cache, steps = self.start()
        positions = torch.full((w.running,), w.context, device=self.device)
        for s in range(1, w.steps):
            if s == w.arrive:
                first = self.prefill_long(cache, 0, w.long)
            self.decode_step(cache, steps, positions, s)
            positions = positions + 1
        return self.outputs(steps, first)


def get_benchmark() -> aisp.Benchmark:
    return SharedStream()


if __name__ == "__main__":
    aisp.main(get_benchmark)
