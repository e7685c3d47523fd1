"""Baseline flex decoding: a sliding-window decode step as a dense mask over the whole KV cache.

Baseline: one decode step of a local-attention layer (a Mistral/Gemma-style 4,096-token sliding
window; 32 query heads on 8 K/V heads, dim 128, bf16) for 32 sequences whose positions differ
(uniform over 4K-32K) in a 32,768-slot cache (4.3 GB of keys and values). Rows differ, so the
window cannot be one slice of the cache; the usual implementation (a 4D mask, as Hugging Face's SDPA
path and the serving kit's decode step build it) turns the positions into an additive (32, 1, 4,
32768) mask (each K/V head's 4 query heads folded into 4 query rows, so the cache is not repeated)
and calls ``F.scaled_dot_product_attention``: the memory-efficient kernel reads all 32,768 keys and
values of every row and masks all but <= 4,096 of them.
Optimized (optimized_flexdecoding.py): FlexAttention with a per-row ``BlockMask`` listing the <= 33
key blocks of each row's window; ``_graph`` also captures the step in a CUDA graph.
Expect (measured, H200, 2026-11-27): 1.606 ms -> 0.2362 ms with the ``_graph`` variant, 6.81x [6.70,
6.93], 2.27 TB/s, 54.2% of HBM on the window's bytes (estimated ~0.2-0.3 ms, ~6-8x); the eager flex step
0.5819 ms, 2.76x, 22.0%. The ``_graph`` variant's first run (2026-11-26) failed verification (its
``out`` buffer undeclared); it now declares it scratch. The workload's bytes are the window's keys and values (0.54 GB) plus q and the
output: ~0.13 ms at HBM speed. Measured again (H200, 2026-11-29): 1.397 -> 0.1948 ms with ``_split`` (the best), 7.18x
[7.03, 7.33], 65.3% of HBM (2.76 TB/s); ``_graph`` 0.2245 ms, 56.7%; the eager flex step 0.2326 ms, 54.7%.
Later that day (H200, 2026-11-29): 1.413 -> 0.1722 ms with ``_fused`` (the best), 8.30x [8.05, 8.56], 74.3% of HBM.
Tolerance: bf16 defaults (the same keys, values and softmax; different kernels and tilings).
Run: python ch18/baseline_flexdecoding.py  |  aisp bench run -t ch18:flexdecoding
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

import aisp
from aisp.kits.llm.model import additive_mask


@dataclass(frozen=True, kw_only=True)
class WindowDecodeWorkload(aisp.Workload):
    batch: int = 32
    heads: int = 32
    kv_heads: int = 8
    head_dim: int = 128
    cache_len: int = 32768
    """Cache slots per sequence (the longest context)."""
    span: int = 4096
    """The query at position p sees keys p - span + 1 .. p (the attention window; not named ``window``,
    which is the Workload's timing window)."""

    def positions(self) -> torch.Tensor:
        """Each row's current position (a fixed draw, uniform over window - 1 .. cache_len - 1)."""
        gen = torch.Generator().manual_seed(0)
        return torch.randint(self.span - 1, self.cache_len, (self.batch,), generator=gen)

    def window_bytes(self) -> int:
        keys = int((self.positions() + 1).clamp(max=self.span).sum())
        return 2 * 2 * keys * self.kv_heads * self.head_dim + 2 * 2 * self.batch * self.heads * self.head_dim


def _workload() -> WindowDecodeWorkload:
    w = WindowDecodeWorkload()
    keys = float((w.positions() + 1).clamp(max=w.span).sum())
    return WindowDecodeWorkload(flops=4.0 * keys * w.heads * w.head_dim, bytes=w.window_bytes(), items=w.batch,
                                item_unit="tokens", precision="bf16", requires=aisp.Requirements(cuda=True),
                                ceiling_note="profiled (torch profiler, H200): _fused: the flex decode kernel 153 of 163 us of "
                                             "kernels a call (3.5 TB/s); 2 reductions 8 us, 2 index kernels 2 us")


WORKLOAD = _workload()


class DenseMaskDecode(aisp.Benchmark):
    """Returns the attention output (batch, heads, 1, head_dim)."""

    workload: WindowDecodeWorkload = WORKLOAD
    inputs = ("q", "k", "v", "pos")

    def setup(self) -> None:
        w, gen = self.workload, self.generator()
        dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32

        def draw(heads: int, tokens: int) -> torch.Tensor:
            return torch.randn(w.batch, heads, tokens, w.head_dim, generator=gen, device=self.device).to(dtype)

        self.q = draw(w.heads, 1)
        self.k, self.v = draw(w.kv_heads, w.cache_len), draw(w.kv_heads, w.cache_len)
        self.pos = w.positions().to(self.device)
        self.prepare()

    def prepare(self) -> None:
        self.keys = torch.arange(self.workload.cache_len, device=self.device)

    def run(self) -> torch.Tensor:
        w = self.workload
        ahead = self.pos[:, None] - self.keys
        visible = (ahead >= 0) & (ahead < w.span)
        bias = additive_mask(visible[:, None, None], w.heads // w.kv_heads, self.q.dtype)
        q = self.q.view(w.batch, w.kv_heads, w.heads // w.kv_heads, w.head_dim)
        return F.scaled_dot_product_attention(q, self.k, self.v, attn_mask=bias).view(self.q.shape)


def get_benchmark() -> aisp.Benchmark:
    return DenseMaskDecode()


if __name__ == "__main__":
    aisp.main(get_benchmark)
