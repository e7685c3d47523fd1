"""Baseline continuous batching: static batches, padded to their longest request.

Baseline: 32 requests (prompts ~256 tokens, log-normal up to 1,024; outputs ~24 tokens, log-normal
up to 128) served 8 at a time in arrival order, the way a first `generate(batch)` server does:
prefill the padded batch, then decode all 8 rows until the batch's longest output is done. A row
whose request finished keeps stepping (its tokens are discarded), and the next batch waits for the
slowest request: with outputs spread like this, a batch's longest is ~3x its median, so most
decode-step rows are padding.
Optimized (optimized_continuous_batching.py): iteration-level scheduling (Orca, vLLM): after every
decode step a finished request leaves its slot and the next waiting request is prefilled into it,
so every decode step works on 8 live requests.
Expect (measured, H200, 2026-11-26): 1180 -> 716.7 ms, 1.53x [1.47, 1.59] (2026-11-23, from a
cut-short first run's raw record: 1684 -> 1021 ms, 1.65x [1.40, 1.94]); 25.6 -> 42.1 GB/s and 2.0 ->
3.3 TFLOP/s, at most 1% of HBM and under 0.5% of bf16 dense. At ~1.2 s per baseline call this is the
chapter's longest call. Smaller streams were measured too (2026-11-23) and won nothing (16 requests:
1.09x with outputs up to 96, 0.99x up to 128): each admission costs its own prefill forward plus
host bookkeeping (the decode steps are eager-launch bound), so a short stream leaves too few padded
decode steps to win back.
Tolerance: tokens exactly (the kit's decoder keeps a wide greedy margin); the top-4 logits per
step at the bf16 defaults (rows see other batch neighbours and paddings).
Run: python ch15/baseline_continuous_batching.py  |  aisp bench run -t ch15:continuous_batching
"""

from __future__ import annotations

import torch
from ch15_serving import GPU_SIZED, StreamBenchmark, StreamWorkload

import aisp
from aisp.kits.llm import DenseKVCache, StreamConfig, static_generate
from aisp.kits.llm.serving import dtype_on, weight_bytes

STREAM = StreamConfig(requests=32, prompt_mean=256, output_mean=24, spread=0.6, max_prompt=1024, max_output=128)


def _workload(w: StreamWorkload) -> StreamWorkload:
    reqs, m = w.requests(), w.model
    tokens = sum(r.output_len for r in reqs)
    prefill = sum(m.prefill_flops(len(r.prompt), len(r.prompt) / 2) for r in reqs)
    decode = sum(m.forward_flops(r.output_len - 1, len(r.prompt) + r.output_len / 2) for r in reqs)
    steps = tokens / w.slots  # decode steps with every slot busy: the least that serves the stream
    return StreamWorkload(stream=w.stream, slots=w.slots, flops=prefill + decode, bytes=steps * weight_bytes(m),
                          items=tokens, item_unit="tokens", precision="bf16", requires=GPU_SIZED, iterations=8,
                          ceiling_note="profiled (py-spy, H200 host): 82% of the optimized host samples issue eager "
                                       "decode steps (attention 27%, RoPE 11%), 11% admissions (prefill 9%)")


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
