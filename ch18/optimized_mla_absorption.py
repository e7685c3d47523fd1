"""Optimized MLA decode: weight absorption, attention in the 576-wide latent space.

Baseline (baseline_mla_absorption.py): every step up-projects the 302 MB latent cache to 16 heads of
keys and values (1.1 TFLOP, ~5 GB of expanded K/V written and read) and attends over them.
Optimized: since k_h = W_UK,h c and v_h = W_UV,h c for every cached latent c,
q_h . k_h = (W_UK,h^T q_h) . c and sum_j p_j v_h,j = W_UV,h (sum_j p_j c_j). So each head's query is
mapped into the latent space once per step (a (16, 32, 128) x (16, 128, 512) bmm), joined with its
RoPE query (576 wide: latent and RoPE parts score against the cache row as stored), and all 16 heads
attend to the cache like 16 query rows of one shared head (multi-query attention): scores
``q_all @ cache^T`` (a bmm per sequence), softmax in fp32, ``P @ c_kv`` (the first 512 columns),
then ``W_UV`` per head and the output projection. The cache is never expanded; the split of
``W_UKV`` into per-head ``W_UK`` and ``W_UV`` is done once in setup (weights, not inputs).
Expect (measured, H200, 2026-11-27): 5.769 ms -> 0.4153 ms, 13.40x [12.50, 14.36] (estimated ~0.15-0.2
ms, ~15-25x); 0.79 TB/s, 18.8% of the declared 0.33 GB floor's HBM time (estimated 45-55%; 2026-11-26:
0.4104 ms, 14.3x). The cache is read
twice (scores, then P @ c_kv: ~0.57 GB) and the (32, 16, 8192) scores make a round trip; a fused
latent-attention kernel (FlashMLA-style, one pass over the cache) is what closes the rest. 2026-11-29 (H200):
0.2492 ms, 22.63x [22.59, 22.67], 31.1% of HBM; the fused variant (optimized_mla_absorption_fused.py) 0.144 ms won.
Run: python ch18/optimized_mla_absorption.py  |  aisp bench run -t ch18:mla_absorption
"""

from __future__ import annotations

import torch
from baseline_mla_absorption import ExpandedMLA

import aisp


class AbsorbedMLA(ExpandedMLA):
    def prepare(self) -> None:
        w = self.workload
        per_head = self.w_ukv.view(w.heads, w.nope + w.v_dim, w.latent)
        self.w_uk = per_head[:, :w.nope].contiguous()  # (heads, nope, latent): q_lat = q_nope @ W_UK
        self.w_uv_t = per_head[:, w.nope:].transpose(1, 2).contiguous()  # (heads, latent, v_dim)

    def run(self) -> torch.Tensor:
        w = self.workload
        q_nope, q_rope = self.queries()
        q_lat = torch.bmm(q_nope.transpose(0, 1), self.w_uk).transpose(0, 1)  # (batch, heads, latent)
        o_lat = self.attend(torch.cat([q_lat, q_rope], -1))  # q_all: (batch, heads, latent + rope)
        o = torch.bmm(o_lat.transpose(0, 1), self.w_uv_t).transpose(0, 1)  # (batch, heads, v_dim)
        return o.reshape(w.batch, -1) @ self.w_o.T

    def attend(self, q_all: torch.Tensor) -> torch.Tensor:
        """The latent attention: softmax(q_all cache^T * scale) c_kv, (batch, heads, latent)."""
        scores = torch.bmm(q_all, self.cache.transpose(1, 2))  # (batch, heads, context)
        p = torch.softmax(scores.float() * self.scale, -1).to(self.cache.dtype)
        return torch.bmm(p, self.cache[..., :self.workload.latent])


def get_benchmark() -> aisp.Benchmark:
    return AbsorbedMLA()


if __name__ == "__main__":
    aisp.main(get_benchmark)
