"""Baseline paged KV cache: every slot reserves the server's longest context (memory headline).

Baseline: continuous batching of 32 requests (prompts ~512 tokens, log-normal up to 2,048;
outputs ~16 tokens, up to 64) over 32 slots (at most 4,096 prompt tokens prefilled together),
with a KV cache that reserves the server's maximum context (4,096 tokens) for every slot, as a
contiguous per-sequence cache must: 32 x 4,096 x 8 KiB = 1 GiB of bf16 keys/values, of which the
stream's live requests fill ~1/5.
Optimized (optimized_paged_kv_cache.py): the same scheduler over a paged cache (vLLM's
PagedAttention layout): 16-token pages in one pool and a block table per slot; a request takes
the pages its prompt and output need when admitted and returns them when done, so the pool holds
only what the 32 longest requests can need at once.
Expect (measured, H200, 2026-11-26): headline peak memory 1.49 GB -> 0.57 GB, 2.64x lower (2.61x on
2026-11-23; estimated ~2x: 0.31 GB of weights + 1 GiB reserved -> + ~0.2 GiB of pages, plus
activations). Time 275.8 -> 330.7 ms (0.83x; 2026-11-23: 367.8 -> 417.2 ms, 0.88x): the paged
variant gathers a step's pages (a copy of the live K/V per layer) before SDPA; both are launch-bound
(17.6 and 14.7 GB/s, under 0.5% of HBM). A paged-attention kernel reads the pages in place (chapter
18).
Tolerance: tokens exactly (the kit's decoder keeps a wide greedy margin); the top-4 logits per
step at the bf16 defaults (keys padded to whole pages are masked, so sums differ only in order).
Run: python ch15/baseline_paged_kv_cache.py  |  aisp bench run -t ch15:paged_kv_cache
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from ch15_serving import GPU_SIZED, StreamBenchmark, StreamWorkload

import aisp
from aisp.kits.llm import ContinuousBatcher, DenseKVCache, StreamConfig
from aisp.kits.llm.serving import dtype_on, weight_bytes

STREAM = StreamConfig(requests=32, prompt_mean=512, output_mean=16, spread=0.6, max_prompt=2048, max_output=64)


@dataclass(frozen=True, kw_only=True)
class PagedWorkload(StreamWorkload):
    max_context: int = 4096
    """Longest sequence (prompt + output) the server accepts: what a contiguous cache reserves."""
    page_size: int = 16
    """Tokens per KV page."""
    prefill_budget: int = 4096
    """Padded prompt tokens prefilled together (bounds prefill activations, as serving schedulers do)."""


def replay_schedule(lengths: Sequence[tuple[int, int]], slots: int, prefill_budget: int
                    ) -> tuple[list[int], list[list[int]]]:
    """A plain replay of the kit's ``ContinuousBatcher`` over requests of (prompt, output) lengths in
    arrival order: before each step it admits waiting requests into free slots while the group's
    longest prompt x its size fits ``prefill_budget`` (at least one); a request's prefill writes its
    prompt and gives its first token, each step writes one token more, and a request leaves after its
    last token (at admission when it asks for one token). Returns, per decode step, the keys/values its
    held requests have written before the step (all of which the step reads), and per admission the
    requests (indices into ``lengths``) held right after it, the admitted ones included (a paged
    cache hands out their pages before their prefill)."""
    held: list[tuple[int, int, int]] = []  # (request, tokens written, decode steps left) per held request
    waiting, steps, admissions = list(range(len(lengths))), [], []
    while waiting or held:
        group: list[int] = []
        for i in waiting[:slots - len(held)]:
            if group and max(lengths[j][0] for j in (*group, i)) * (len(group) + 1) > prefill_budget:
                break
            group.append(i)
        waiting = waiting[len(group):]
        if group:
            admissions.append([r for r, _, _ in held] + group)
        held = [h for h in held + [(i, lengths[i][0], lengths[i][1] - 1) for i in group] if h[2] > 0]
        if held:
            steps.append(sum(n for _, n, _ in held))
            held = [(r, n + 1, left - 1) for r, n, left in held if left > 1]
    return steps, admissions


def cache_tokens_per_step(lengths: Sequence[tuple[int, int]], slots: int, prefill_budget: int) -> list[int]:
    """Per decode step of the kit's ``ContinuousBatcher`` (:func:`replay_schedule`), the keys/values
    its held requests have written before the step (all of which the step reads)."""
    return replay_schedule(lengths, slots, prefill_budget)[0]


def resident_bytes(w: PagedWorkload) -> float:
    """The least bytes serving the stream must hold at once: the decoder's weights (bf16, every
    parameter) and the keys/values of the busiest decode step of the pair's schedule (the tokens its
    requests have written, which that step reads). Not counted: what a cache reserves beyond them
    (the baseline's 4,096 tokens a slot, the optimized's pages of the whole stream), activations,
    the prompts and the outputs. Any exact-attention design under this schedule holds at least this."""
    lengths = [(len(r.prompt), r.output_len) for r in w.requests()]
    live = max(cache_tokens_per_step(lengths, w.slots, w.prefill_budget))
    itemsize = torch.bfloat16.itemsize
    return itemsize * w.model.params() + live * w.model.kv_bytes_per_token(itemsize)


def _workload(w: PagedWorkload = PagedWorkload(stream=STREAM, slots=32)) -> PagedWorkload:
    reqs, m = w.requests(), w.model
    tokens = sum(r.output_len for r in reqs)
    prefill = sum(m.prefill_flops(len(r.prompt), len(r.prompt) / 2) for r in reqs)
    decode = sum(m.forward_flops(r.output_len - 1, len(r.prompt) + r.output_len / 2) for r in reqs)
    return PagedWorkload(stream=w.stream, slots=w.slots, max_context=w.max_context, page_size=w.page_size,
                         prefill_budget=w.prefill_budget,
                         flops=prefill + decode, bytes=tokens / w.slots * weight_bytes(m), items=tokens,
                         item_unit="tokens", precision="bf16", headline="memory", resident_bytes=resident_bytes(w),
                         ceiling_note="profiled (memory, H200): peak 565 MiB: weights 297, K/V page pools 138 (sized for the "
                                      "whole stream), a prefill chunk's QKV and FFN transients 128",
                         requires=GPU_SIZED, iterations=10)


WORKLOAD = _workload()


class ReservedCache(StreamBenchmark):
    """Serves the stream; returns (tokens (requests, longest output), top logits (..., TOP))."""

    workload = WORKLOAD

    def run(self) -> tuple[torch.Tensor, torch.Tensor]:
        w = self.workload
        cache = DenseKVCache(w.model, w.slots, w.max_context, self.device, dtype_on(self.device))
        return ContinuousBatcher(self.model, cache, w.slots, None, w.prefill_budget).run(self.requests).as_tuple()


def get_benchmark() -> aisp.Benchmark:
    return ReservedCache()


if __name__ == "__main__":
    aisp.main(get_benchmark)
