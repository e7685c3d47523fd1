"""Baseline speculative decoding: target-only greedy decode, one token per target forward.

Baseline: one 512-token prompt (batch 1: the latency case speculation is for) is prefilled, then
47 greedy decode steps run eagerly with the chapter's 156M-parameter decoder (the target): every
token costs one full forward, ~250 kernel launches (~1.5 ms) to read 0.31 GB of weights.
Optimized (optimized_speculative_decoding.py): a draft model proposes 4 tokens, the target checks
them in one forward over 5 positions and keeps the longest agreeing prefix plus its own next token.
The draft is the target's first 2 of 8 blocks, sharing its embedding, blocks and cache; its LM head
is the target's with 20% of the rows shuffled among themselves (``draft_miss``), standing in for a
small model trained to imitate the target: the kit's synthetic decoder is so regular that a shared
head would agree on every token (measured on a CPU: 100% even with 0 blocks), which no real draft does.
Expect: ~1.3-1.6x on an H100/H200 (estimate, not yet measured), bound by the acceptance rate:
the draft agrees with the target on ~80% of single tokens, so of 4 proposals ~2.4 survive on
average (a miss ends the round); measured on a CPU in fp32: ``acceptance_rate`` (accepted /
proposed) 0.61 and 0.43, 3.2 and 2.5 tokens per target forward (seeds 0 and 1). A round costs
4 draft steps (~0.27 of a target step's launches each) plus one target step.
Tolerance: tokens exactly (verification keeps exactly the target's greedy tokens); the top-4
logits at the bf16 defaults (the target scores 5 positions at once instead of one).
Run: python ch16/baseline_speculative_decoding.py  |  aisp bench run -t ch16:speculative_decoding
"""

from __future__ import annotations

from dataclasses import dataclass

from baseline_decode_cuda_graph import EagerDecode
from ch16_decode import GPU_SIZED, DecodeWorkload

import aisp


@dataclass(frozen=True, kw_only=True)
class SpecWorkload(DecodeWorkload):
    propose: int = 4
    """Draft tokens proposed per round (k)."""
    draft_layers: int = 2
    """Target blocks the draft runs (its first ones)."""
    draft_miss: float = 0.2
    """Share of the draft head's rows shuffled among themselves (the draft's disagreement)."""


def _workload() -> SpecWorkload:
    w = SpecWorkload(batch=1, prompt=512, steps=48)
    return SpecWorkload(batch=w.batch, prompt=w.prompt, steps=w.steps, flops=w.step_flops(), bytes=w.step_bytes(),
                        items=w.batch * w.steps, item_unit="tokens", precision="bf16", requires=GPU_SIZED)


WORKLOAD = _workload()


class TargetOnly(EagerDecode):
    workload: SpecWorkload = WORKLOAD


def get_benchmark() -> aisp.Benchmark:
    return TargetOnly()


if __name__ == "__main__":
    aisp.main(get_benchmark)
