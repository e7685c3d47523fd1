"""Baseline split-KV decode: one Triton program per (sequence, K/V head) walks the whole 32K context.

Baseline: one decode step's attention for one layer of a long-context batch: 2 sequences with
32,768 cached tokens, 32 query heads on 8 K/V heads (GQA, head dim 128), bf16 cache in the kit's
layout (rows, kv_heads, context, dim), filled at setup (the server's state); the per-call input is
the step's queries, each K/V head's 4 query heads folded into the rows of one attention. Kernel:
``decode_attention(..., splits=1)`` (ch18_decode.py): the FlashAttention-2 way, one program per
(sequence, K/V head) streams its 32,768 keys and values in 64-key tiles with an online softmax and
normalizes at the end. That is 16 programs on a GPU of 132 SMs: 88% of the SMs idle, and each
busy SM can only keep its few tiles in flight, so HBM is far from busy. Reads 268 MB per call
(~64 us at 4.2 TB/s).
Optimized (optimized_split_kv_decode.py): flash-decoding: the same kernel over 32 slices of 1,024
keys per (sequence, head), 512 programs, then a merge kernel.
Expect (measured, H200, 2026-11-27): 0.5478 ms -> 0.1168 ms, 4.69x [4.44, 4.95] (estimated ~0.2-0.3 ->
~0.08-0.1 ms, 2-3.5x); 2.30 TB/s, 54.7% of HBM (the baseline 11.7%; 2026-11-26: 4.29x, 50.7%). The workload's bytes are the
cache's K and V, read once; FLOPs are 4 x head_dim per (query head, key).
Tolerance: bf16 defaults. Both variants run the same tiles in the same order; only the merge (fp32
partials weighed by exp2 of their max) differs: on a CPU the two agree to 6e-8 in fp32.
Run: python ch18/baseline_split_kv_decode.py  |  aisp bench run -t ch18:split_kv_decode
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from ch18_decode import decode_attention

import aisp


@dataclass(frozen=True, kw_only=True)
class DecodeWorkload(aisp.Workload):
    rows: int = 2
    """Sequences in the decode batch."""
    kv_heads: int = 8
    groups: int = 4
    """Query heads per K/V head."""
    head_dim: int = 128
    context: int = 32768
    """Cached tokens per sequence."""
    splits: int = 32
    """Context slices per (sequence, K/V head) in the optimized variant (a power of two)."""

    def cache_elements(self) -> int:
        return 2 * self.rows * self.kv_heads * self.context * self.head_dim


def _workload() -> DecodeWorkload:
    w = DecodeWorkload()
    return DecodeWorkload(flops=2.0 * w.cache_elements() * w.groups, bytes=2.0 * w.cache_elements(), items=w.rows,
                          item_unit="tokens", precision="bf16",
                          requires=aisp.Requirements(cuda=True, packages=("triton",)))


WORKLOAD = _workload()


class OneProgramPerHead(aisp.Benchmark):
    """Returns the attention output (rows, kv_heads, groups, head_dim)."""

    workload: DecodeWorkload = WORKLOAD
    inputs = ("q",)
    splits = 1

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        shape = (w.rows, w.kv_heads, w.context, w.head_dim)
        self.k = torch.randn(shape, generator=gen, device=self.device).to(dtype)
        self.v = torch.randn(shape, generator=gen, device=self.device).to(dtype)
        self.q = torch.randn(w.rows, w.kv_heads, w.groups, w.head_dim, generator=gen, device=self.device).to(dtype)

    def run(self) -> torch.Tensor:
        return decode_attention(self.q, self.k, self.v, self.splits)


def get_benchmark() -> aisp.Benchmark:
    return OneProgramPerHead()


if __name__ == "__main__":
    aisp.main(get_benchmark)
