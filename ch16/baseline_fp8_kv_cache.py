"""Baseline fp8 KV cache: decode attention over a bf16 KV cache (SDPA), bound by the cache bytes.

Baseline: one decode step's attention for one layer: 32 sequences with 8,192 cached tokens each,
32 query heads on 8 K/V heads (GQA, head dim 128). The cache is the kit's layout (rows, kv_heads,
context, dim) in bf16, filled at setup (the server's state); the per-call input is the step's
queries, folded as the kit does: each K/V head's 4 query heads are the rows of one attention
(``F.scaled_dot_product_attention``, a flash kernel). It must read every key and value:
1.07 GB per call (~0.25 ms at 4.2 TB/s) for 4.3 GFLOP.
Optimized (optimized_fp8_kv_cache.py): the cache in e4m3 with one scale per K/V head, read by a
Triton split-K decode attention kernel that widens it in registers: 0.54 GB per call. The
v_blocks variant stores the values in dim-major blocks of 64 tokens, so the kernel reads them
without byte loads (optimized_fp8_kv_cache_v_blocks.py says why).
Expect (measured, H200, 2026-11-28): 1.44x [1.43, 1.45] (estimated 1.5-1.9x; 1.15x on 2026-11-26):
SDPA over the bf16 cache 0.2495 ms (4.3 TB/s on its 1.07 GB) vs the fp8 Triton kernel 0.1731 ms
(3.10 TB/s on 0.54 GB, 74% of HBM): half the bytes at ~72% of SDPA's rate. With the partials now
written for the 4 real query rows, not 16 (H200, 2026-11-28): SDPA 0.2479 ms; the row-major kernel
0.1661 ms, 1.49x [1.47, 1.51] (3.23 TB/s); the v_blocks variant 0.1464 ms, 1.69x [1.67, 1.70]
(3.67 TB/s, 87% of HBM). The
workload's bytes are the optimized variant's (the fp8 cache), so its GB/s is its share of HBM.
Tolerance: e4m3 keeps 3 mantissa bits. Emulated on a CPU in fp32 at this size (3 seeds, 4 rows):
the fp8 output differs from the exact one by at most 0.0032 where outputs have rms 0.018 (random
keys spread attention over all 8,192 positions), relative L2 0.039 (bf16's own error: 0.0003
max). Declared: element_tol 0.08 (0.007 absolute at max |out| ~0.09, 5 rms), rtol 0, max relative L2 0.08 (about 2x margin); another
seed's cache errs by ~1.4x the rms.
Run: python ch16/baseline_fp8_kv_cache.py  |  aisp bench run -t ch16:fp8_kv_cache
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

import aisp


@dataclass(frozen=True, kw_only=True)
class KVWorkload(aisp.Workload):
    rows: int = 32
    """Sequences in the decode batch."""
    kv_heads: int = 8
    groups: int = 4
    """Query heads per K/V head."""
    head_dim: int = 128
    context: int = 8192
    """Cached tokens per sequence."""
    splits: int = 16
    """Context slices per (row, head) in the fp8 kernel (a power of two)."""

    def cache_elements(self) -> int:
        return 2 * self.rows * self.kv_heads * self.context * self.head_dim


def _workload() -> KVWorkload:
    w = KVWorkload()
    return KVWorkload(flops=2.0 * w.cache_elements() * w.groups, bytes=float(w.cache_elements()),
                      items=w.rows, item_unit="tokens", precision="fp8", element_tol=0.08, rtol=0.0, max_rel_l2=0.08,
                      ceiling_note="ncu: _attend at DRAM 72% (top stall short_scoreboard: V's byte loads); v_blocks' _attend at DRAM 83%, timed 0.146 ms (87% of copy)",
                      requires=aisp.Requirements(cuda=True, packages=("triton",)))


WORKLOAD = _workload()


class BF16KVAttention(aisp.Benchmark):
    """Returns the attention output (rows, kv_heads, groups, dim)."""

    workload: KVWorkload = WORKLOAD
    inputs = ("q",)

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        shape = (w.rows, w.kv_heads, w.context, w.head_dim)
        self.k = torch.randn(shape, generator=gen, device=self.device).to(dtype)
        self.v = torch.randn(shape, generator=gen, device=self.device).to(dtype)
        self.q = torch.randn(w.rows, w.kv_heads, w.groups, w.head_dim, generator=gen, device=self.device).to(dtype)
        self.prepare()

    def prepare(self) -> None:
        """How the cache is stored (bf16 here)."""

    def run(self) -> torch.Tensor:
        return F.scaled_dot_product_attention(self.q, self.k, self.v)


def get_benchmark() -> aisp.Benchmark:
    return BF16KVAttention()


if __name__ == "__main__":
    aisp.main(get_benchmark)
