"""Optimized score_mod: ALiBi as a FlexAttention ``score_mod``, causality as a ``BlockMask``.

Baseline (baseline_flex_score_mod.py): SDPA over all S^2 scores with a 512 MiB bias tensor.
Optimized: ``flex_attention(q, k, v, score_mod=alibi, block_mask=causal)`` compiled with
``torch.compile``: Inductor generates one fused Triton attention kernel with the score_mod's
``score + m[h] * (kv_idx - q_idx)`` inlined (a multiply-add in registers; ``m`` is a 16-float
tensor the kernel reads), and the block mask, built once in setup() from the causal rule
(it depends only on the sequence length, like the baseline's bias), lists the 128 x 128 tiles
to visit: tiles above the diagonal are skipped, only diagonal tiles apply the mask per element.
Half the FLOPs of the baseline and no bias bytes. Compilation (setup()) is reported as
``compile_s``.
Expect: H200, measured: 1.62x [1.54, 1.72], 1.086 -> 0.666 ms, 207 TFLOP/s (26% of bf16
peak, not profiled); compile 4.9 s.
Run: python ch14/optimized_flex_score_mod.py  |  aisp bench run -t ch14:flex_score_mod
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from baseline_flex_score_mod import MaterializedBiasAttention, alibi_slopes
from ch14_common import compile_metrics, timed_compile
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

import aisp


def alibi_score_mod(slopes: torch.Tensor) -> Callable[..., torch.Tensor]:
    def score_mod(score: torch.Tensor, b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor,
                  kv_idx: torch.Tensor) -> torch.Tensor:
        return score + slopes[h] * (kv_idx - q_idx)
    return score_mod


def causal(b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
    return q_idx >= kv_idx


class FlexScoreMod(MaterializedBiasAttention):
    compile_key = "flex_attention"
    """The name its first compile time is kept under (compile_s)."""

    def prepare(self) -> None:
        w = self.workload
        self.slopes = alibi_slopes(w.heads, self.device)
        self.score_mod = alibi_score_mod(self.slopes)
        self.block_mask = create_block_mask(causal, None, None, w.seq, w.seq, device=self.device)
        self.attend = timed_compile(self.compile_key, self.device, self.compile)

    def compile(self) -> Callable[..., torch.Tensor]:
        self.attend = torch.compile(flex_attention, dynamic=False)
        self.run()
        return self.attend

    def run(self) -> torch.Tensor:
        return self.attend(self.q, self.k, self.v, score_mod=self.score_mod, block_mask=self.block_mask)

    def metrics(self) -> dict[str, float]:
        return compile_metrics(self.compile_key)


def get_benchmark() -> aisp.Benchmark:
    return FlexScoreMod()


if __name__ == "__main__":
    aisp.main(get_benchmark)
