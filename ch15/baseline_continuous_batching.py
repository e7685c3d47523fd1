"""Baseline continuous batching: static batches, padded to their longest request.

Baseline: 16 requests (prompts ~256 tokens, log-normal up to 1,024; outputs ~32 tokens, log-normal
(spread 0.8) up to 128) served 8 at a time in arrival order, the way a first `generate(batch)` server does:
prefill the padded batch, then decode all 8 rows until the batch's longest output is done. A row
whose request finished keeps stepping (its tokens are discarded), and the next batch waits for the
slowest request: with outputs spread like this, a batch's longest is ~3x its median, so most
decode-step rows are padding.
Optimized (optimized_continuous_batching.py): iteration-level scheduling (Orca, vLLM): after every
decode step a finished request leaves its slot and the next waiting request is prefilled into it,
so every decode step works on 8 live requests.
Expect: ~1.4-1.8x on an H100/H200 (estimate; a first H200 run at 32 requests (outputs up to 128)
measured 1.65x, 1.7 s per call; one with outputs up to 96, 1.09x: each admission's own prefill
costs a forward, so short outputs leave too few decode steps to save): the decode steps (eager-launch
bound, ~5 ms each in a first H200 run) fall from sum-of-batch-maxima to ~total tokens / 8; tokens/s rises by
the same factor. The optimized variant pays more, smaller prefills.
Tolerance: tokens exactly (the kit's decoder keeps a wide greedy margin); the top-4 logits per
step at the bf16 defaults (rows see other batch neighbours and paddings).
Run: python ch15/baseline_continuous_batching.py  |  aisp bench run -t ch15:continuous_batching
"""

from __future__ import annotations

import torch
from ch15_serving import GPU_SIZED, StreamBenchmark, StreamWorkload, dtype_on, weight_bytes

import aisp
from aisp.kits.llm import DenseKVCache, StreamConfig, static_generate

STREAM = StreamConfig(requests=16, prompt_mean=256, output_mean=32, spread=0.8, max_prompt=1024, max_output=128)


def _workload(w: StreamWorkload) -> StreamWorkload:
    reqs, m = w.requests(), w.model
    tokens = sum(r.output_len for r in reqs)
    prefill = sum(m.forward_flops(len(r.prompt), len(r.prompt) / 2) for r in reqs)
    decode = sum(m.forward_flops(r.output_len - 1, len(r.prompt) + r.output_len / 2) for r in reqs)
    steps = tokens / w.slots  # decode steps with every slot busy: the least that serves the stream
    return StreamWorkload(stream=w.stream, slots=w.slots, flops=prefill + decode, bytes=steps * weight_bytes(m),
                          items=tokens, item_unit="tokens", precision="bf16", requires=GPU_SIZED)


WORKLOAD = _workload(StreamWorkload(stream=STREAM, slots=8))


class StaticBatches(StreamBenchmark):
    """Serves the stream; returns (tokens (requests, longest output), top logits (..., TOP))."""

    workload = WORKLOAD

    def run(self) -> tuple[torch.Tensor, torch.Tensor]:
        w = self.workload
        cache = DenseKVCache(w.model, w.slots, w.stream.max_prompt + w.stream.max_output, self.device,
                             dtype_on(self.device))
        return static_generate(self.model, cache, self.requests, w.slots).as_tuple()


def get_benchmark() -> aisp.Benchmark:
    return StaticBatches()


if __name__ == "__main__":
    aisp.main(get_benchmark)
