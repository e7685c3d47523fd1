"""Baseline score_mod: ALiBi attention with a materialized bias tensor through SDPA.

Baseline: causal attention with ALiBi position biases (head h adds -m_h * (i - j) to score
(i, j), m_h = 2^(-8 (h + 1) / H)) on 4 x 16 heads x 4,096 tokens x 64 (bf16). The bias, with
-inf above the diagonal for causality, is built once in setup() as a (1, 16, 4096, 4096) bf16
tensor (512 MiB) and passed to ``F.scaled_dot_product_attention(attn_mask=bias)``. An arbitrary
mask rules out the flash kernel and the causal block skip: the kernel computes all S^2 scores
and reads the bias for every one of them.
Optimized (optimized_flex_score_mod.py): FlexAttention: the bias is a ``score_mod`` function
compiled into the attention kernel (computed in registers, no tensor) and causality is a
``BlockMask`` that skips the tiles above the diagonal: half the FLOPs, no bias traffic.
Expect: H200, measured: 1.62x [1.54, 1.72], 1.086 -> 0.666 ms (207 TFLOP/s counting the
causal half, 26% of bf16 peak); compile 4.9 s. CPU: not run.
Tolerance: bf16 default. The baseline's bias is rounded to bf16 (the mask must have the query's
dtype), the score_mod's is exact fp32: on a CPU (16 heads x 1,024 tokens) the two differed by
0.016 at most (output rms 0.34) and 0.003 in relative L2.
Run: python ch14/baseline_flex_score_mod.py  |  aisp bench run -t ch14:flex_score_mod
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

import aisp


@dataclass(frozen=True, kw_only=True)
class AttentionWorkload(aisp.Workload):
    batch: int = 4
    heads: int = 16
    seq: int = 4096
    head_dim: int = 64


def attention_workload(**kw: int) -> AttentionWorkload:
    w = AttentionWorkload(**kw)
    causal_flops = 4.0 * w.batch * w.heads * w.seq * w.seq * w.head_dim / 2
    return AttentionWorkload(**kw, flops=causal_flops, items=w.batch * w.seq, item_unit="tokens",
                             precision="bf16", requires=aisp.Requirements(cuda=True, packages=("triton",)),
                             timeout_s=600)


WORKLOAD = attention_workload(
    ceiling_note="ncu (H200): _triton's _alibi_flash_fwd 413 us, tensor pipe 40%, occupancy 25%, DRAM 7%; top stall barrier 2.26: its warps' syncs")


def alibi_slopes(heads: int, device: torch.device) -> torch.Tensor:
    """m_h = 2^(-8 (h + 1) / H), fp32."""
    return 2.0 ** (-8.0 * torch.arange(1, heads + 1, device=device, dtype=torch.float32) / heads)


def alibi_causal_bias(heads: int, seq: int, device: torch.device) -> torch.Tensor:
    """(heads, seq, seq) fp32: m_h * (j - i) on and below the diagonal, -inf above it."""
    pos = torch.arange(seq, device=device)
    rel = (pos[None, :] - pos[:, None]).float()
    bias = alibi_slopes(heads, device)[:, None, None] * rel
    return bias.masked_fill(rel > 0, float("-inf"))


class MaterializedBiasAttention(aisp.Benchmark):
    workload = WORKLOAD
    inputs = ("q", "k", "v")

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        shape = (w.batch, w.heads, w.seq, w.head_dim)
        self.q, self.k, self.v = (torch.randn(shape, generator=gen, device=self.device).to(torch.bfloat16)
                                  for _ in range(3))
        self.prepare()

    def prepare(self) -> None:
        self.bias = alibi_causal_bias(self.workload.heads, self.workload.seq, self.device).to(torch.bfloat16)[None]

    def run(self) -> torch.Tensor:
        return F.scaled_dot_product_attention(self.q, self.k, self.v, attn_mask=self.bias)


def get_benchmark() -> aisp.Benchmark:
    return MaterializedBiasAttention()


if __name__ == "__main__":
    aisp.main(get_benchmark)
