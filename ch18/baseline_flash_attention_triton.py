"""Baseline flash attention: materialized causal attention, Q K^T, mask, softmax and P V as separate ops.

Baseline: prefill attention for 4 sequences of 4,096 tokens, 32 heads of dim 128, causal, bf16, as
eager attention code writes it: S = (Q / sqrt(d)) K^T (a batched GEMM that writes the 4 x 32 x
4,096 x 4,096 score matrix, 4.3 GB in bf16), mask the future in place, softmax (fp32 inside, bf16
out: another 4.3 GB), then P V. Each of the three passes over S reads and writes it through HBM
(~26 GB in all, ~6 ms at 4.2 TB/s), and both GEMMs do the full square: 1.1 TFLOP where causal
needs 0.55.
Optimized (optimized_flash_attention_triton.py): our FlashAttention-2-style Triton kernel
(ch18_attention.py): one pass, S and P stay on chip, only the causal half of the key blocks is
visited; reads Q, K, V and writes O (537 MB). Two more variants run PyTorch's SDPA on the same
inputs: its flash backend (``_sdpa``, FlashAttention-2) and cuDNN's (``_cudnn``).
Expect (measured, H200, 2026-11-27): 16.40 ms -> 1.398 ms (our Triton kernel), 11.7x (estimated
~8-10 -> ~1.2-1.6 ms, 5-9x); 393.5 TFLOP/s, 50% of the 783 TFLOP/s bf16 peak. cuDNN's SDPA won:
1.025 ms, 16.09x [15.65, 16.55], 536.5 TFLOP/s, 69%; SDPA's flash backend 1.754 ms, 9.35x, 313.5
TFLOP/s, 40%. The baseline ran at 33.5 TFLOP/s (4.3%). (2026-11-26: Triton 1.467 ms, cuDNN 1.061 ms.) The workload's FLOPs are the causal pairs' (4 x head_dim per (query, key) pair,
keys at or before the query), so every variant's TFLOP/s is its share of the tensor-core peak; its bytes
are the flash floor (Q, K, V, O).
Tolerance: bf16 rtol, element_tol 0.01 (0.03 absolute at max |out| ~3), rel L2 default. The baseline rounds the scores to bf16
before the softmax (its own error vs fp64: up to 0.016), the fused kernels keep them in fp32 (up to
0.008). Measured on a CPU (bf16, 7 seeds, up to 8 heads x 2,048 tokens): baseline vs a flash-style
computation differ by up to 0.0156, one bf16 step at |out| 2-4 in the first causal rows (few
keys, large outputs), while the former default atol was 0.02 x the outputs' RMS (~0.1): 15-194
elements failed it; relative L2 0.0044 (default bound 0.02). 0.03 is 2x the measured worst.
Run: python ch18/baseline_flash_attention_triton.py  |  aisp bench run -t ch18:flash_attention_triton
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

import aisp


@dataclass(frozen=True, kw_only=True)
class PrefillWorkload(aisp.Workload):
    batch: int = 4
    heads: int = 32
    seq: int = 4096
    """Tokens per sequence (a multiple of 128 for the autotuned kernel)."""
    head_dim: int = 128

    def elements(self) -> int:
        """Elements of one of Q, K, V, O."""
        return self.batch * self.heads * self.seq * self.head_dim


def _workload() -> PrefillWorkload:
    w = PrefillWorkload()
    causal_pairs = w.batch * w.heads * w.seq * (w.seq + 1) / 2
    return PrefillWorkload(flops=4.0 * w.head_dim * causal_pairs, bytes=4.0 * w.elements() * 2, items=w.batch * w.seq,
                           item_unit="tokens", precision="bf16", element_tol=0.01,
                           ceiling_note="profiled (ncu, H200): cuDNN kernel 921 us at tensor pipe 67%, issue 39%, DRAM 12%; our _tma at tensor pipe 51%, barrier 3.7; _hostdesc 0.955 ms (74%)",
                           requires=aisp.Requirements(cuda=True, packages=("triton",)))


WORKLOAD = _workload()


class MaterializedAttention(aisp.Benchmark):
    """Returns the attention output (batch, heads, seq, head_dim)."""

    workload: PrefillWorkload = WORKLOAD
    inputs = ("q", "k", "v")

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        shape = (w.batch, w.heads, w.seq, w.head_dim)
        self.q, self.k, self.v = (torch.randn(shape, generator=gen, device=self.device).to(dtype) for _ in range(3))
        self.prepare()

    def prepare(self) -> None:
        """What the variant builds once: here the causal mask (True above the diagonal)."""
        seq = self.workload.seq
        self.future = torch.ones(seq, seq, dtype=torch.bool, device=self.device).triu(1)

    def run(self) -> torch.Tensor:
        scores = (self.q * self.workload.head_dim**-0.5) @ self.k.transpose(-2, -1)
        scores.masked_fill_(self.future, float("-inf"))
        return torch.softmax(scores, dim=-1) @ self.v


def get_benchmark() -> aisp.Benchmark:
    return MaterializedAttention()


if __name__ == "__main__":
    aisp.main(get_benchmark)
