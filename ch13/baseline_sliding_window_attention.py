"""Baseline sliding-window attention: SDPA with a dense S x S boolean mask.

Baseline: each token attends to itself and the previous 1,023 tokens. Expressed as a dense
boolean ``attn_mask``, SDPA cannot use FlashAttention (which supports only no mask or plain
causal), so it runs the memory-efficient kernel over every Q x K tile, reading the mask as a
bias: all S^2 scores are computed and 7/8 of them are masked away (S = 8,192, window 1,024).
Optimized (optimized_sliding_window_attention.py): FlexAttention with a ``BlockMask`` built
from the same rule: the compiled Triton kernel visits only the key blocks inside the window
(about W/S of the tiles) and applies the exact mask in the partial ones.
Expect: 4-8x on an H100/H200 (useful FLOPs are ~1/8 of the dense ones). Measured on our H200:
6.76 -> 0.93 ms (7.30x), 278 TFLOP/s useful.
Tolerance: bf16 inputs and outputs; both keep fp32 softmax statistics but round different
partial sums to bf16: element_tol 0.015 (0.05 absolute at |o| up to ~3), rtol 5e-2, as for
attention_standard.
Run: python ch13/baseline_sliding_window_attention.py  |  aisp bench run -t ch13:sliding_window_attention
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from baseline_attention_standard import AttentionWorkload, make_qkv

import aisp


@dataclass(frozen=True, kw_only=True)
class WindowWorkload(AttentionWorkload):
    span: int = 1024
    """Keys each query sees: itself and the span - 1 before it (the attention window; not named
    ``window``, which is the Workload's timing window)."""


def _workload() -> WindowWorkload:
    w = WindowWorkload(batch=4, heads=16, seq=8192, head_dim=128, span=1024)
    pairs = w.span * w.seq - w.span * (w.span - 1) / 2
    flops = 4.0 * w.batch * w.heads * pairs * w.head_dim
    return WindowWorkload(batch=w.batch, heads=w.heads, seq=w.seq, head_dim=w.head_dim, span=w.span,
                          flops=flops, bytes=4 * w.batch * w.heads * w.seq * w.head_dim * 2,
                          items=w.batch * w.seq, item_unit="tokens", precision="bf16", element_tol=0.015, rtol=5e-2,
                          requires=aisp.Requirements(cuda=True, packages=("triton",)),
                          ceiling_note="ncu (H200): _cudnn's kernel 514 us, 132 CTAs of 3 warpgroups, tensor pipe 60%, "
                                       "issue 43%, DRAM 21%, top stall barrier 1.33; band-edge tiles ~11% masked")


WORKLOAD = _workload()


def in_window(q_idx: torch.Tensor, kv_idx: torch.Tensor, window: int) -> torch.Tensor:
    """True where query q_idx may attend to key kv_idx: causal and at most window - 1 back."""
    return (kv_idx <= q_idx) & (q_idx - kv_idx < window)


class DenseMaskAttention(aisp.Benchmark):
    workload = WORKLOAD
    inputs = ("q", "k", "v")

    def setup(self) -> None:
        self.q, self.k, self.v = make_qkv(self)
        idx = torch.arange(self.workload.seq, device=self.device)
        self.mask = in_window(idx[:, None], idx[None, :], self.workload.span)

    def run(self) -> torch.Tensor:
        return F.scaled_dot_product_attention(self.q, self.k, self.v, attn_mask=self.mask)


def get_benchmark() -> aisp.Benchmark:
    return DenseMaskAttention()


if __name__ == "__main__":
    aisp.main(get_benchmark)
