"""Optimized fused RoPE + KV write: one GEMM over the concatenated QKV weight, one Triton RoPE/write kernel.

Baseline (baseline_fused_rope_kv_write.py): three projection GEMMs, RoPE on Q and K (the kit's
``rotate_``, with gathered tables) and the kit's cache write (slot indices, two ``index_put_``):
~20 launches for ~52 MB of traffic.
Optimized: the three weights concatenated once at setup into one (6,144 x 4,096) matrix, so one
GEMM makes Q, K and V together (the same bytes, one launch instead of three); then
``rope_kv_write`` (ch18_rope.py): one program per (token, head) reads its 128 values, rotates query
and key heads in fp32 with the kit's whole-head tables at the token's position, and stores query
heads to the output and K and V straight into the cache at [row, head, position]. Two launches in
place of ~18; the bytes the step moves are the same.
Expect (measured, H200, 2026-11-27): 0.4564 ms -> 0.1666 ms, 2.84x [2.69, 3.00] (estimated ~0.11-0.14 ->
~0.035-0.05 ms; 2026-11-26: 2.62x); 0.31 TB/s, 7.4% of HBM: the launches of the GEMM, the kernel and the read-back bound
it, not the 50 MB of weights.
Run: python ch18/optimized_fused_rope_kv_write.py  |  aisp bench run -t ch18:fused_rope_kv_write
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from baseline_fused_rope_kv_write import SeparateOps
from ch18_rope import rope_kv_write

import aisp


class FusedRopeWrite(SeparateOps):
    def prepare(self) -> None:
        self.w_qkv = torch.cat(self.weights)
        del self.weights

    def run(self) -> tuple[torch.Tensor, ...]:
        qkv = F.linear(self.x, self.w_qkv)
        q = rope_kv_write(qkv, self.positions, self.cos, self.sin, self.k_cache, self.v_cache, self.workload.heads)
        return (q, *self.written())


def get_benchmark() -> aisp.Benchmark:
    return FusedRopeWrite()


if __name__ == "__main__":
    aisp.main(get_benchmark)
