"""Baseline MLA decode: the latent KV cache expanded to full keys and values at every step.

Baseline: one decode step of a DeepSeek-V2-Lite-shaped multi-head latent attention (MLA) layer:
width 2048, 16 heads, a 512-wide latent ``c_kv`` plus a 64-wide decoupled RoPE key cached per token
(1,152 bytes in bf16, stored together as one (batch, context, 576) buffer), query/key dims 128 + 64,
value dim 128; 32 sequences at 8,192 cached tokens (302 MB of cache). The direct transcription of
the equations (as Hugging Face's first DeepSeek-V2 code did): up-project the whole cache every step,
``c_kv @ W_UKV`` -> per head a 128-wide key and a 128-wide value (1.1 TFLOP, 2.1 GB written), append
the shared RoPE key to every head's key (1.6 GB), then SDPA over 16 heads of 192/128 dims.
Optimized (optimized_mla_absorption.py): absorb ``W_UK`` into the query and ``W_UV`` into the
output; attend in the latent space over the cache as stored (16 heads sharing one 576-wide "head").
Expect (measured, H200, 2026-11-27): 5.769 ms -> 0.4153 ms, 13.40x [12.50, 14.36] (estimated ~3-3.5 ->
~0.15-0.2 ms, ~15-25x); 0.79 TB/s, 18.8% of HBM on the floor (2026-11-26: 14.3x, 18.9%). The workload's bytes are the latent cache
and the layer's weights read once (0.33 GB): ~0.08 ms at HBM speed. Measured again (H200, 2026-11-29): 5.640 ms ->
0.144 ms with the ``_fused`` variant (the best), 39.08x [38.97, 39.20], 53.8% of HBM (2.27 TB/s); the two-bmm
optimized 0.2492 ms, 22.63x, 31.1%.
Later that day (H200, 2026-11-29): 5.646 -> 0.1120 ms with ``_fused_qo`` (the best), 50.37x [48.99, 51.80], 69.5%.
Then (H200, 2026-11-29): 5.681 -> 0.1111 ms with ``_graph`` (the best), 51.17x [51.04, 51.29], ~70%;
``_fused_qo`` 0.1127 in that run.
Tolerance: bf16 defaults. The two orders round differently (bf16 keys vs a bf16 latent query, bf16
scores): on a CPU in bf16 (8 x 1,024 tokens) they differed by 0.55% in relative L2 (limit 2%).
Run: python ch18/baseline_mla_absorption.py  |  aisp bench run -t ch18:mla_absorption
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

import aisp


@dataclass(frozen=True, kw_only=True)
class MLAWorkload(aisp.Workload):
    batch: int = 32
    context: int = 8192
    """Cached tokens per sequence (the current one included)."""
    dim: int = 2048
    heads: int = 16
    latent: int = 512
    """kv_lora_rank: the compressed KV every head's keys and values come from."""
    nope: int = 128
    """Per-head key/query dims without position..."""
    rope: int = 64
    """...and the decoupled RoPE dims (one key shared by all heads)."""
    v_dim: int = 128

    def cache_bytes(self) -> int:
        return 2 * self.batch * self.context * (self.latent + self.rope)

    def weight_bytes(self) -> int:
        h = self.heads
        return 2 * (self.dim * h * (self.nope + self.rope) + h * self.latent * (self.nope + self.v_dim) + h * self.v_dim * self.dim)

    def absorbed_flops(self) -> float:
        h, n = self.heads, self.context
        per_row = (self.dim * h * (self.nope + self.rope) + h * self.nope * self.latent + h * n * (2 * self.latent + self.rope)
                   + h * self.latent * self.v_dim + h * self.v_dim * self.dim)
        return 2.0 * self.batch * per_row


def _workload() -> MLAWorkload:
    w = MLAWorkload()
    return MLAWorkload(flops=w.absorbed_flops(), bytes=w.cache_bytes() + w.weight_bytes(), items=w.batch,
                       item_unit="tokens", precision="bf16", requires=aisp.Requirements(cuda=True),
                       ceiling_note="profiled (do_bench + torch profiler, H200): _wgmma's latent kernel + merge 91 of 106 us a step "
                                    "(3.32 TB/s, 79% of HBM copy); GEMMs 16 us")


WORKLOAD = _workload()


class ExpandedMLA(aisp.Benchmark):
    """Returns the layer's output (batch, dim) for the new token of each sequence."""

    workload: MLAWorkload = WORKLOAD
    inputs = ("x", "cache")

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32

        def draw(*shape: int, scale: float = 1.0) -> torch.Tensor:
            return (torch.randn(*shape, generator=gen, device=self.device) * scale).to(dtype)

        self.x = draw(w.batch, w.dim)
        self.cache = draw(w.batch, w.context, w.latent + w.rope)  # [c_kv | rotated k_rope] per token
        self.w_q = draw(w.heads * (w.nope + w.rope), w.dim, scale=w.dim ** -0.5)
        self.w_ukv = draw(w.heads * (w.nope + w.v_dim), w.latent, scale=w.latent ** -0.5)
        self.w_o = draw(w.dim, w.heads * w.v_dim, scale=(w.heads * w.v_dim) ** -0.5)
        half = w.rope // 2
        angle = (w.context - 1) * 10000.0 ** (-torch.arange(half, device=self.device) / half)
        self.cos, self.sin = (torch.cat([f(angle)] * 2).to(dtype) for f in (torch.cos, torch.sin))
        self.scale = (w.nope + w.rope) ** -0.5
        self.prepare()

    def prepare(self) -> None:
        """Weights a variant derives once (none here)."""

    def queries(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Per head the position-free query (batch, heads, nope) and the rotated RoPE query (batch, heads, rope)."""
        w = self.workload
        q_nope, q_rope = (self.x @ self.w_q.T).view(w.batch, w.heads, -1).split([w.nope, w.rope], -1)
        swapped = torch.cat([-q_rope[..., w.rope // 2:], q_rope[..., :w.rope // 2]], -1)
        return q_nope, q_rope * self.cos + swapped * self.sin

    def run(self) -> torch.Tensor:
        w, (b, n, h) = self.workload, (self.workload.batch, self.workload.context, self.workload.heads)
        q_nope, q_rope = self.queries()
        c_kv, k_rope = self.cache.split([w.latent, w.rope], -1)
        k_nope, v = (c_kv @ self.w_ukv.T).view(b, n, h, -1).split([w.nope, w.v_dim], -1)
        k = torch.cat([k_nope, k_rope[:, :, None].expand(b, n, h, w.rope)], -1)
        q = torch.cat([q_nope, q_rope], -1)[:, :, None]
        o = F.scaled_dot_product_attention(q, k.transpose(1, 2), v.transpose(1, 2), scale=self.scale)
        return o.reshape(b, h * w.v_dim) @ self.w_o.T


def get_benchmark() -> aisp.Benchmark:
    return ExpandedMLA()


if __name__ == "__main__":
    aisp.main(get_benchmark)
