"""Baseline KV cache reuse: no cache; every decode step recomputes the whole sequence.

Baseline: 8 prompts of 2,048 tokens generate 16 tokens each (greedy) with the chapter's 156M-
parameter decoder. Without a KV cache, step t runs the model over all 2,048 + t tokens again
(prompt and generated so far) to get the next token's logits: 16 forward passes over ~16.4k
tokens, each ~3.5 TFLOP (2 x 90M block weights x 16.4k tokens, plus ~0.5 TFLOP of causal
attention), ~55 TFLOP per call, almost all of it recomputing keys and values the previous step
already had. (The LM head runs on the last position only, as any generate loop does.)
Optimized (optimized_kv_cache_reuse.py): one prefill writes every prompt token's keys/values into a
preallocated cache; each of the 15 decode steps runs the model on one new token per sequence and
attends to the cache: ~3.5 TFLOP in all (the prefill), and a decode step reads the weights
(0.25 GB) and the cache (0.14 GB) instead of recomputing them.
Expect (measured, H200, 2026-11-26): 2.91x [2.35, 3.60], 167.1 -> 57.09 ms with 16 generated tokens
(2026-11-23: 207.3 -> 126.2 ms, 1.72x; a first run with 32 tokens: 414 -> 171 ms, 2.4x). The
baseline recomputes ~56 TFLOP (the harness's 27.6 TFLOP/s divided the optimized variant's work by the
baseline's time, declared 4.6 TFLOP then: the LM head on every prompt token; 3.54 TFLOP since
2026-11-29, the head on each prompt's last token only). The optimized call is the prefill (~3.5 TFLOP) plus 15 eager decode steps;
between the two runs the kit's eager steps shed ~30% of their host ops and the call more than
halved, but it is still launch-bound (100 GB/s, 2% of HBM), and its p10-p90 spread (53.9-67.2 ms) in
that host-bound loop keeps the interval wide. CUDA graphs take it next (ch16 decode_cuda_graph,
4.49x).
Tolerance: tokens exactly (the kit's decoder keeps a wide greedy margin); the top-4 logits per
step at the bf16 defaults (the two variants sum attention and matmuls in different orders).
Run: python ch15/baseline_kv_cache_reuse.py  |  aisp bench run -t ch15:kv_cache_reuse
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch15_serving import GPU_SIZED, MODEL

import aisp
from aisp.kits.llm import TOP, LLMConfig, build_decoder, greedy_top
from aisp.kits.llm.serving import dtype_on, weight_bytes


@dataclass(frozen=True, kw_only=True)
class ReuseWorkload(aisp.Workload):
    model: LLMConfig = MODEL
    """The decoder."""
    batch: int = 8
    """Sequences generated together."""
    prompt: int = 2048
    """Prompt tokens per sequence."""
    steps: int = 16
    """Tokens generated per sequence (the first from the prefill's logits)."""


def _workload(w: ReuseWorkload = ReuseWorkload()) -> ReuseWorkload:
    m = w.model
    prefill = m.prefill_flops(w.batch * w.prompt, w.prompt / 2, w.batch)
    decode = sum(m.forward_flops(w.batch, w.prompt + t) for t in range(1, w.steps))
    kv = sum(w.batch * (w.prompt + t) * m.kv_bytes_per_token() for t in range(1, w.steps))
    return ReuseWorkload(flops=prefill + decode, bytes=(w.steps - 1) * weight_bytes(m) + kv,
                         items=w.batch * w.steps, item_unit="tokens", precision="bf16", requires=GPU_SIZED, iterations=12,
                         ceiling_note="profiled (torch profiler, H200): GPU busy 14% of a 154 ms window under the profiler: "
                                      "2,883 launches (91% under 10 us), 21.6 ms of kernels; host gaps 130 ms")


WORKLOAD = _workload()


class Recompute(aisp.Benchmark):
    """Generates ``steps`` greedy tokens per prompt; returns (tokens (batch, steps), top logits
    (batch, steps, TOP))."""

    workload = WORKLOAD
    inputs = ("prompts",)

    def setup(self) -> None:
        w = self.workload
        self.model = build_decoder(w.model, self.seed, self.device, dtype_on(self.device), draw_on_device=True)
        self.prompts = torch.randint(w.model.vocab, (w.batch, w.prompt), generator=self.generator(),
                                     device=self.device)

    def run(self) -> tuple[torch.Tensor, torch.Tensor]:
        w = self.workload
        seq = torch.empty(w.batch, w.prompt + w.steps, dtype=torch.long, device=self.device)
        seq[:, :w.prompt] = self.prompts
        tokens, top = [], []
        for t in range(w.steps):
            n = w.prompt + t
            positions = torch.arange(n, device=self.device).expand(w.batch, n)
            hidden = self.model.hidden(seq[:, :n], positions)[:, -1]
            token, values = greedy_top(self.model.head(hidden), TOP)
            seq[:, n] = token
            tokens.append(token)
            top.append(values)
        return torch.stack(tokens, 1), torch.stack(top, 1)


def get_benchmark() -> aisp.Benchmark:
    return Recompute()


if __name__ == "__main__":
    aisp.main(get_benchmark)
