"""Optimized paged KV cache, lower peak: the paged variant with its three largest excesses cut.

Baseline (baseline_paged_kv_cache.py): each of 32 slots reserves 4,096 tokens of K/V (1 GiB).
Optimized (optimized_paged_kv_cache.py, 0.564 GB peak, capacity 77%): 16-token pages. Its peak is
setup ~301 MiB (weights 297) + a pool of 1,108 pages (138.5 MiB: every request's prompt + output) +
~98 MiB transient: the SwiGLU of the largest prefill group (6 x 627 padded tokens: gate/up 40 MiB,
SiLU 20, product 20, two residuals 15). This variant keeps the math and the schedule:
1. The MLP runs on row blocks of <= 1,024 rows when a forward has more (prefills; a decode step's 32
   rows run as one): gate/up, SiLU and product of a block are 1/4 of the group's, each block's
   output added in place to its rows of the residual (RMSNorm and the GEMMs are row-wise).
2. A decode step reads the pages indexed by (page, K/V head) at once: ``pool[table[:, None], heads]``
   is (batch, kv_heads, pages, 16, 64), already SDPA's layout, where the kit gathers (batch, pages,
   kv_heads, 16, 64) and copies it transposed. One copy per K/V per layer instead of two: the peak
   after 1, 32 rows x 1,776 keys, falls from 83 to 56 MiB, and 1,088 copy kernels (35 ms) go.
3. The pool holds the pages of the requests held at the schedule's busiest admission (976 + the
   trash page, 122 MiB), not every request's: pages return to the free list when a request finishes
   and the next admission reuses them. ``replay_schedule`` (the baseline's replay of the kit's
   scheduler, checked against the batcher in tests/test_ch15_pairs.py) finds it from the lengths; a
   smaller pool raises ``MemoryError`` (a real server would make the request wait).
Expect: not yet measured. Estimate (arithmetic, not a measurement): peak 564 -> ~503 MB (setup 301
MiB + pool 122 + transient ~56, the decode step's K/V reads), capacity 77% -> ~86% (1. and 2. alone
~83%); time about the optimized's (1,088 fewer copy kernels, ~1,300 more launches in 9 prefills).
Run: python ch15/optimized_paged_kv_cache_lowpeak.py  |  aisp bench run -t ch15:paged_kv_cache
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from baseline_paged_kv_cache import replay_schedule
from optimized_paged_kv_cache import PagedCache
from torch import nn

import aisp
from aisp.kits.llm import PagedKVCache, PageLayout, pages_for
from aisp.kits.llm.cache import PagedStep
from aisp.kits.llm.model import Block

FFN_ROWS = 1024
"""Most rows an MLP block computes at once (a 3,762-token prefill group: 4 blocks)."""


class RowBlockedMLP(nn.Module):
    """The kit's decoder ``block`` (its weights, not a copy), whose SwiGLU MLP runs ``rows`` rows at
    a time when a forward has more; attention as the block does it."""

    def __init__(self, block: Block, rows: int = FFN_ROWS) -> None:
        super().__init__()
        self.block, self.rows = block, rows

    def forward(self, x: torch.Tensor, fwd: object, layer: int) -> torch.Tensor:
        b = self.block
        if len(x) <= self.rows:
            return b(x, fwd, layer)
        x = x + b.attn(b.norm1(x), fwd, layer)  # a new tensor: its row blocks are updated in place
        for start in range(0, len(x), self.rows):
            part = x[start:start + self.rows]
            gate_up = b.gate_up(b.norm2(part))
            act = F.silu(gate_up[:, :b.ffn]) * gate_up[:, b.ffn:]
            del gate_up
            part.add_(b.down(act))
        return x


class HeadMajorStep(PagedStep):
    """The kit's paged step reading a layer's pages as (batch, kv_heads, keys, dim) in one gather."""

    def read(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        b, n = self.pages.shape
        _, _, heads, ps, dim = self.cache.k.shape
        index = (self.pages[:, None], self.cache.heads)  # (batch, 1, pages) with (kv_heads, 1)
        return tuple(pool[layer][index].view(b, heads, n * ps, dim)[:, :, :self.kv_len]
                     for pool in (self.cache.k, self.cache.v))


class HeadMajorPagedKVCache(PagedKVCache):
    """The kit's paged cache (same pool, table and writes) whose steps read with :class:`HeadMajorStep`."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.heads = torch.arange(self.k.shape[2], device=self.k.device)[:, None]

    def bind(self, positions: torch.Tensor, kv_len: int, rows: torch.Tensor | None = None,
             fresh: bool = False, tail: bool = False) -> HeadMajorStep:
        return HeadMajorStep(self, positions, kv_len, rows, fresh, tail)


def busiest_pages(lengths: list[tuple[int, int]], slots: int, prefill_budget: int, page_size: int) -> int:
    """The most pages the kit's scheduler has handed out at once over requests of these lengths: the
    held requests' ceil((prompt + output) / page_size) right after an admission."""
    need = [pages_for(p + o, page_size) for p, o in lengths]
    return max(sum(need[i] for i in held) for held in replay_schedule(lengths, slots, prefill_budget)[1])


class LowPeakPagedCache(PagedCache):
    cache_type = HeadMajorPagedKVCache
    ffn_rows = FFN_ROWS

    def setup(self) -> None:
        super().setup()
        for i, block in enumerate(self.model.blocks):
            self.model.blocks[i] = RowBlockedMLP(block, self.ffn_rows)

    def layout(self) -> PageLayout:
        """1 trash page + the pages of the schedule's busiest admission; tables as wide as the context."""
        w = self.workload
        lengths = [(len(r.prompt), r.output_len) for r in self.requests]
        return PageLayout(pages=1 + busiest_pages(lengths, w.slots, w.prefill_budget, w.page_size),
                          page_size=w.page_size, rows=w.slots, max_pages=pages_for(w.max_context, w.page_size))


def get_benchmark() -> aisp.Benchmark:
    return LowPeakPagedCache()


if __name__ == "__main__":
    aisp.main(get_benchmark)
