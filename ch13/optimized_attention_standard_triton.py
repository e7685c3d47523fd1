"""Optimized attention, our Triton kernel: causal flash attention from ``aisp.kits.sparse_flash``.

Baseline (baseline_attention_standard.py): QK^T, mask, softmax and PV as separate kernels with
the S x S scores in HBM.
Optimized: the fused causal attention of optimized_attention_standard_cudnn.py (cuDNN, 65% of the
bf16 peak at this shape, profiled: tensor pipe 59%, occupancy 14%, one CTA of 384 threads an SM),
written as our own Triton kernel instead: ``aisp.kits.sparse_flash`` with the causal band (every
key at or before the query) as its tile lists, built in setup from the pair's mask rule. Each
128-query block walks its full key tiles unmasked and masks only the diagonal's two 64-key tiles.
The loop is ch18's fastest Triton kernel (``_ahead``: 71% of the bf16 peak at 4 x 32 x 4K, causal):
TMA descriptors, 128 x 64 tiles, 8 warps, 2 stages, 128 registers (two programs an SM), each P V
wgmma waited for in its iteration, each Q K^T issued a tile ahead.
Expect: not yet measured. Estimate (arithmetic, not a measurement): 0.26-0.30 ms against cuDNN's
0.269 ms (a tie, +-10%; 58-66% of the bf16 peak on the 137 useful GFLOP). ``_ahead``'s 0.966 us per
128 x 64 tile an SM at 4 x 32 x 4K gives 8 x 16 heads x 272 tiles / 132 SMs = 264 tiles an SM,
0.255 ms if each tile costs the same; but a 2K sequence has 16 query blocks a head where ``_ahead``
had 32: one diagonal tile in 8.5 is masked (6.1% there), and the shorter programs (17 tiles on
average, 33 there) pay their prologue and epilogue twice as often: +3-15%.
Run: python ch13/optimized_attention_standard_triton.py  |  aisp bench run -t ch13:attention_standard
"""

from __future__ import annotations

import torch
from baseline_attention_standard import ExplicitAttention, make_qkv

import aisp
from aisp.kits.sparse_flash import Band, sparse_flash_attention, tile_lists


class TritonCausalAttention(ExplicitAttention):
    def setup(self) -> None:
        s = self.workload.seq
        self.q, self.k, self.v = make_qkv(self)
        self.tiles = tile_lists(lambda q, kv: kv <= q, Band(s), s, self.device)

    def run(self) -> torch.Tensor:
        return sparse_flash_attention(self.q, self.k, self.v, self.tiles)


def get_benchmark() -> aisp.Benchmark:
    return TritonCausalAttention()


if __name__ == "__main__":
    aisp.main(get_benchmark)
