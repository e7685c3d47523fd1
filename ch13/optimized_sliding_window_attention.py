"""Optimized sliding-window attention: FlexAttention with a block-sparse mask.

Baseline (baseline_sliding_window_attention.py): dense-mask SDPA computes all S^2 scores.
Optimized: ``create_block_mask`` turns the rule "causal and within 1,024 tokens" into a
``BlockMask`` (which 128 x 128 tiles are empty, full or partial) once in setup(), and
``torch.compile(flex_attention)`` generates a fused Triton attention kernel that skips the empty
tiles and evaluates the rule only inside partial ones. Work drops from S^2 to about S x W.
Expect: 4-8x on an H100/H200; compile time (seconds) is paid in setup(). Measured on our H200:
7.30x.
Run: python ch13/optimized_sliding_window_attention.py  |  aisp bench run -t ch13:sliding_window_attention
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from baseline_sliding_window_attention import DenseMaskAttention, in_window, make_qkv
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

import aisp


class FlexWindowAttention(DenseMaskAttention):
    def setup(self) -> None:
        w = self.workload
        self.q, self.k, self.v = make_qkv(self)

        def rule(b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
            return in_window(q_idx, kv_idx, w.span)

        self.block_mask = create_block_mask(rule, None, None, w.seq, w.seq, device=self.device)
        self.attend = self.flex()
        self.run()

    def flex(self) -> Callable[..., torch.Tensor]:
        """``flex_attention`` as run() calls it, compiled with the default options."""
        return torch.compile(flex_attention)

    def run(self) -> torch.Tensor:
        return self.attend(self.q, self.k, self.v, block_mask=self.block_mask)


def get_benchmark() -> aisp.Benchmark:
    return FlexWindowAttention()


if __name__ == "__main__":
    aisp.main(get_benchmark)
