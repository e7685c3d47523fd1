"""Baseline fused RoPE + KV write: Q, K, V projections, RoPE on Q and K and the cache write as separate ops.

Baseline: the attention input of one decode step for one layer: 64 sequences, one new token each,
width 4,096, 32 query heads on 8 K/V heads of dim 128, bf16, written the way a model file usually
reads: ``q_proj``, ``k_proj``, ``v_proj`` (three GEMMs over the same activations), RoPE on Q and on
K with the serving kit's ``rotate_`` (a swap-halves copy and two in-place kernels each) and tables
gathered at the tokens' positions, then the kit's ``DenseKVCache.bind(...).write`` (slot indices,
two ``index_put_``). ~20 launches for ~52 MB of HBM traffic (the 50 MB of weights, ~13 us at
4.2 TB/s): at ~6 us per eager launch the host, not the GPU, sets the pace. Both variants return the
rotated queries and read back the keys and values they wrote (two gathers each, the same on both).
Optimized (optimized_fused_rope_kv_write.py): one GEMM over the concatenated weight and one Triton
kernel that rotates Q and K and stores Q, K and V where they go.
Expect (measured, H200, 2026-11-27): 0.4564 ms -> 0.1666 ms, 2.84x [2.69, 3.00] (estimated ~0.11-0.14 ->
~0.035-0.05 ms, 2.5-3.5x; both sides ~4x slower than estimated, noisy: p90 0.62 and 0.20 ms); 0.31
TB/s, 7.4% of HBM: launch-bound (2026-11-26: 0.5228 -> 0.1988 ms, 2.62x). The workload's bytes are the weights, activations and the
written K/V; the ceiling here is launches, then HBM.
Tolerance: bf16 defaults. The kit's ``rotate_`` rounds to bf16 twice (x * cos, then + swapped *
sin), the kernel once from fp32; the GEMMs may pick other kernels for the concatenated weight:
differences of about one bf16 step, far inside rtol 0.05 and the RMS-scaled atol.
Run: python ch18/baseline_fused_rope_kv_write.py  |  aisp bench run -t ch18:fused_rope_kv_write
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

import aisp
from aisp.kits.llm import DenseKVCache, LLMConfig
from aisp.kits.llm.rope import rotate_, rotation

FUSED_KERNELS = 4
"""Kernels of the optimized run(): the QKV GEMM, the Triton RoPE/write kernel and the two gathers
that read K and V back (tests/test_latency_ceilings.py recounts the three torch ones on a CPU)."""
FUSED_DEPENDENT = 2
"""Of those, the kernels that read what the kernel before them wrote: the RoPE/write kernel (the GEMM's
qkv) and the K gather (the K the RoPE kernel stored). The GEMM reads the input; the V gather the V the
RoPE kernel stored, not the K the gather before it read."""


@dataclass(frozen=True, kw_only=True)
class RopeWorkload(aisp.Workload):
    tokens: int = 64
    """Sequences in the decode step (one new token each, token t is cache row t)."""
    heads: int = 32
    kv_heads: int = 8
    head_dim: int = 128
    max_len: int = 4096
    """Cache slots per sequence; positions are drawn in [0, max_len)."""

    def config(self) -> LLMConfig:
        return LLMConfig(dim=self.heads * self.head_dim, layers=1, heads=self.heads, kv_heads=self.kv_heads)

    def qkv_width(self) -> int:
        return (self.heads + 2 * self.kv_heads) * self.head_dim


def _workload() -> RopeWorkload:
    w = RopeWorkload()
    dim, width = w.heads * w.head_dim, w.qkv_width()
    moved = dim * width + w.tokens * (dim + width)  # weights, activations in, Q/K/V out
    # Latency: the optimized's FUSED_KERNELS, at their fewest one graph launch and its nodes (eager, 4 x
    # 5.84 us; as a graph ~6 us, under the ~12 us of its bytes at HBM speed, so HBM stays the ceiling).
    return RopeWorkload(flops=2.0 * w.tokens * dim * width, bytes=2.0 * moved, items=w.tokens, item_unit="tokens",
                        precision="bf16", requires=aisp.Requirements(cuda=True, packages=("triton",)),
                        latency=aisp.LatencyCounts(graph_launches=1, graph_nodes=FUSED_KERNELS - FUSED_DEPENDENT,
                                                   dependent_graph_nodes=FUSED_DEPENDENT),
                        ceiling_note="profiled (torch profiler, H200): GPU busy 4% of a 0.67 ms window under the profiler: "
                                     "4 kernels, 27 us (QKV GEMM 16 us, ~3.1 TB/s); host gaps 541 us a call",
                        window="idle")


WORKLOAD = _workload()


class SeparateOps(aisp.Benchmark):
    """Returns (rotated queries (tokens, heads, head_dim), K and V read back from the cache (tokens, kv_heads, head_dim))."""

    workload: RopeWorkload = WORKLOAD
    inputs = ("x", "positions")
    state = ("k_cache", "v_cache")

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        cfg, dim = w.config(), w.heads * w.head_dim

        def weight(rows: int) -> torch.Tensor:
            return (torch.randn(rows, dim, generator=gen, device=self.device) * dim**-0.5).to(dtype)

        self.weights = [weight(w.heads * w.head_dim), weight(w.kv_heads * w.head_dim), weight(w.kv_heads * w.head_dim)]
        self.x = torch.randn(w.tokens, dim, generator=gen, device=self.device).to(dtype)
        self.positions = torch.randint(0, w.max_len, (w.tokens,), generator=gen, device=self.device)
        cos, sin = rotation(cfg, torch.arange(w.max_len, device=self.device), dtype)  # (max_len, 1, head_dim)
        self.cos, self.sin = cos.contiguous(), sin.contiguous()
        self.cache = DenseKVCache(cfg, w.tokens, w.max_len, self.device, dtype)
        self.k_cache, self.v_cache = self.cache.k[0], self.cache.v[0]
        self.rows = torch.arange(w.tokens, device=self.device)
        self.prepare()

    def prepare(self) -> None:
        """How the variant holds its weights (three here)."""

    def written(self) -> tuple[torch.Tensor, torch.Tensor]:
        """K and V at each token's row and position."""
        return self.k_cache[self.rows, :, self.positions], self.v_cache[self.rows, :, self.positions]

    def run(self) -> tuple[torch.Tensor, ...]:
        w = self.workload
        q, k, v = (F.linear(self.x, wt).view(w.tokens, -1, w.head_dim) for wt in self.weights)
        cos, sin = self.cos[self.positions], self.sin[self.positions]
        rotate_(q, cos, sin)
        rotate_(k, cos, sin)
        self.cache.bind(self.positions[:, None], w.max_len).write(0, k[:, None], v[:, None])
        return (q, *self.written())


def get_benchmark() -> aisp.Benchmark:
    return SeparateOps()


if __name__ == "__main__":
    aisp.main(get_benchmark)
