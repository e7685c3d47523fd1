"""Baseline speculative decoding: target-only greedy decode, one token per target forward.

Baseline: one 512-token prompt (batch 1: the latency case speculation is for) is prefilled, then
47 greedy decode steps run eagerly with the chapter's 156M-parameter decoder (the target): every
token costs one full forward, ~250 kernel launches (~1.5 ms) to read 0.25 GB of block and head weights.
Optimized (optimized_speculative_decoding.py): a draft model proposes 4 tokens, the target checks
them in one forward over 5 positions and keeps the longest agreeing prefix plus its own next token.
The draft is the target's first 2 of 8 blocks, sharing its embedding, blocks and cache; its LM head
is the target's with 20% of the rows shuffled among themselves (``draft_miss``), standing in for a
small model trained to imitate the target: the kit's synthetic decoder is so regular that a shared
head would agree on every token (measured on a CPU: 100% even with 0 blocks), which no real draft does.
Expect (measured, H200, 2026-11-26): NOT faster: 0.97x [0.92, 1.02], 177.4 ms target-only vs 175.3
ms speculative for 48 tokens, both noisy (cv 14% and 31%; p10-p90 165-214 and 167-236 ms);
acceptance_rate 0.50, 2.82 tokens per target forward (~17 target forwards instead of 47).
2026-11-23: 281.7 -> 268.6 ms, 1.12x [1.01, 1.25] (estimated 1.3-1.6x). Since then the kit's leaner
eager steps shrank the target's step, while the 4 eager draft steps per round (plus the draft's head
and the per-round sync) cost about what the fewer target passes save. Both run eagerly at batch 1,
host/launch-bound at ~1.6% of HBM (66-67 GB/s). Next: graph the draft and verify steps.
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
