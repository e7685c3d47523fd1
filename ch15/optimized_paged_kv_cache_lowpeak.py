"""Optimized paged KV cache, lower peak: the paged variant with its two largest transients cut.

Baseline (baseline_paged_kv_cache.py): each of 32 slots reserves 4,096 tokens of K/V (1 GiB).
Optimized (optimized_paged_kv_cache.py, 0.564 GB peak, capacity 77%): 16-token pages. Its peak is
setup ~301 MiB (weights 297) + a pool of 1,108 pages (138.5 MiB: every request's prompt + output) +
~98 MiB transient: the SwiGLU of the largest prefill group (6 x 627 padded tokens: gate/up 40 MiB,
SiLU 20, product 20, two residuals 15). This variant keeps the math and the schedule:
1. The MLP runs on row blocks of <= 1,024 rows (the kit's ``Block.mlp_rows``) when a forward has
   more (prefills; a decode step's 32 rows run as one): gate/up, SiLU and product of a block are
   1/4 of the group's, each block's output added in place to its rows of the residual.
2. A decode step reads the pages indexed by (page, K/V head) at once: ``pool[table[:, None], heads]``
   is (batch, kv_heads, pages, 16, 64), already SDPA's layout, where the kit gathers (batch, pages,
   kv_heads, 16, 64) and copies it transposed. One copy per K/V per layer instead of two: the peak
   after 1, 32 rows x 1,776 keys, falls from 83 to 56 MiB, and 1,088 copy kernels (35 ms) go.
The pool stays the paged variant's (1,108 pages, every request's prompt + output). Sizing it to
the schedule's busiest admission (976 pages) would cut 16 MiB more, but only by reading the pool
size off a replay of this very stream, which a server does not have: not done.
Expect: measured, H200, 2026-11-29: peak 564.4 -> 522.2 MB, capacity 77% -> 83% (estimated ~521
MB); memory 2.86x below the baseline's 1,493.9 MB. Time 776.7 ms against the paged variant's 721.8
in the same run (the baseline 607.4): 7.6% slower, not profiled.
Run: python ch15/optimized_paged_kv_cache_lowpeak.py  |  aisp bench run -t ch15:paged_kv_cache
"""

from __future__ import annotations

import torch
from optimized_paged_kv_cache import PagedCache

import aisp
from aisp.kits.llm import PagedKVCache
from aisp.kits.llm.cache import PagedStep

FFN_ROWS = 1024
"""Most rows the kit block's MLP computes at once (``Block.mlp_rows``; a 3,762-token prefill group: 4 blocks)."""


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


class LowPeakPagedCache(PagedCache):
    cache_type = HeadMajorPagedKVCache
    ffn_rows = FFN_ROWS

    def setup(self) -> None:
        super().setup()
        for block in self.model.blocks:
            block.mlp_rows = self.ffn_rows  # the kit block's MLP in row blocks (prefills)


def get_benchmark() -> aisp.Benchmark:
    return LowPeakPagedCache()


if __name__ == "__main__":
    aisp.main(get_benchmark)
