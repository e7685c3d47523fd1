"""Baseline GQA decode: the K/V heads repeated to one per query head, then SDPA.

Baseline: one decode step's attention of a Llama-3-8B-shaped layer (32 query heads sharing 8 K/V
heads, dim 128, bf16) for 16 sequences over a 16,384-token KV cache (1.07 GB of keys and values).
The implementation most models shipped first (Hugging Face's ``repeat_kv``): expand each K/V head
to its 4 query heads with ``repeat_interleave``, then ``F.scaled_dot_product_attention`` (flash) as if
it were multi-head attention. The repeat reads the cache once and writes 4 copies (4.3 GB), and
attention reads the copies: ~9.7 GB of HBM traffic for 1.07 GB of information.
Optimized: SDPA with ``enable_gqa=True`` (optimized_gqa_no_repeat.py), or the 4 query heads of each
K/V head folded into 4 query rows (optimized_gqa_no_repeat_fold.py): the cache is read once.
Expect (measured, H200, 2026-11-27): 5.357 ms -> 0.2835 ms, 18.31x [16.45, 20.38] (estimated ~2.5-3 ->
~0.3-0.4 ms, ~7-9x); 3.79 TB/s, 90.2% of HBM (``_fold``: 0.2971 ms, 18.0x, 86.1%). 2026-11-26: 16.0x, 75%. The workload's bytes
are the cache read once (plus q and the output), so the optimized share of HBM bandwidth is its roofline
figure.
Tolerance: bf16 defaults (same kernel family, same keys and values; only the head grouping differs).
Run: python ch18/baseline_gqa_no_repeat.py  |  aisp bench run -t ch18:gqa_no_repeat
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

import aisp


@dataclass(frozen=True, kw_only=True)
class GQAWorkload(aisp.Workload):
    batch: int = 16
    heads: int = 32
    """Query heads..."""
    kv_heads: int = 8
    """...sharing these K/V heads (heads / kv_heads query heads each)."""
    context: int = 16384
    """Cached tokens every query attends to."""
    head_dim: int = 128
    queries: int = 1
    """New tokens per sequence (1: a decode step)."""

    def kv_bytes(self, itemsize: int = 2) -> int:
        return 2 * self.batch * self.kv_heads * self.context * self.head_dim * itemsize


def _workload() -> GQAWorkload:
    w = GQAWorkload()
    q_and_out = 2 * 2 * w.batch * w.heads * w.queries * w.head_dim
    return GQAWorkload(flops=4.0 * w.batch * w.heads * w.queries * w.context * w.head_dim, bytes=w.kv_bytes() + q_and_out,
                       items=w.batch * w.queries, item_unit="tokens", precision="bf16",
                       requires=aisp.Requirements(cuda=True))


WORKLOAD = _workload()


class RepeatKV(aisp.Benchmark):
    """Returns the attention output (batch, heads, queries, head_dim)."""

    workload: GQAWorkload = WORKLOAD
    inputs = ("q", "k", "v")

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32

        def draw(heads: int, tokens: int) -> torch.Tensor:
            return torch.randn(w.batch, heads, tokens, w.head_dim, generator=gen, device=self.device).to(dtype)

        self.q = draw(w.heads, w.queries)
        self.k, self.v = draw(w.kv_heads, w.context), draw(w.kv_heads, w.context)

    def run(self) -> torch.Tensor:
        groups = self.workload.heads // self.workload.kv_heads
        k, v = (t.repeat_interleave(groups, dim=1) for t in (self.k, self.v))
        return F.scaled_dot_product_attention(self.q, k, v)


def get_benchmark() -> aisp.Benchmark:
    return RepeatKV()


if __name__ == "__main__":
    aisp.main(get_benchmark)
