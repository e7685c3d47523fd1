"""KV caches for :class:`aisp.kits.llm.model.Decoder`: a preallocated (dense) one and a paged one.

Both hold keys and values of every layer and are *bound* to one forward with ``bind(positions,
rows)``: which cache rows (sequences) the batch's rows are, and the position of every new token.
The bound step writes the new keys/values at those positions, reads back every key up to the
longest position, and masks keys after each query's own position. Storage starts zeroed, so
masked slots never hold NaN (a masked NaN would still poison attention's weighted sum).

* :class:`DenseKVCache` reserves ``max_len`` slots per row: (layers, rows, kv_heads, max_len, dim).
* :class:`PagedKVCache` holds a pool of ``page_size``-token pages, (layers, pages, kv_heads,
  page_size, dim), and a block table per row that maps a position's page index to a pool page.
  Page 0 is a trash page: unused table entries point to it, so padding tokens and finished rows
  write there harmlessly (their slots are always masked). :class:`PagePool` hands pages out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from aisp.kits.llm.config import LLMConfig


class KVCache(Protocol):
    """What attention needs from a cache bound to one forward."""

    fresh: bool
    """Every row starts at position 0: attention needs only the new keys (no read, no mask)."""

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store new keys/values (batch, tokens, kv_heads, dim) at the bound positions."""

    def read(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values (batch, kv_heads, keys, dim) up to the longest bound position."""

    def mask(self, positions: torch.Tensor) -> torch.Tensor:
        """Boolean (batch, 1, tokens, keys): key j is visible to the query at position p iff j <= p."""


def visible(positions: torch.Tensor, keys: int) -> torch.Tensor:
    return (torch.arange(keys, device=positions.device) <= positions[..., None])[:, None]


class DenseKVCache:
    """``max_len`` slots reserved for each of ``rows`` sequences."""

    def __init__(self, cfg: LLMConfig, rows: int, max_len: int, device: torch.device, dtype: torch.dtype) -> None:
        shape = (cfg.layers, rows, cfg.kv_heads, max_len, cfg.head_dim)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)

    def bind(self, positions: torch.Tensor, kv_len: int, rows: torch.Tensor | None = None,
             fresh: bool = False) -> DenseStep:
        """A step writing at ``positions`` (batch, tokens) of cache ``rows`` (the first batch rows when None);
        ``kv_len`` bounds every position + 1 (known on the host, so no sync); ``fresh``: the rows
        start at position 0 (a prefill)."""
        return DenseStep(self, positions, kv_len, rows, fresh)

    def nbytes(self) -> int:
        return 2 * self.k.numel() * self.k.element_size()


class DenseStep:
    def __init__(self, cache: DenseKVCache, positions: torch.Tensor, kv_len: int, rows: torch.Tensor | None,
                 fresh: bool) -> None:
        self.cache, self.positions, self.kv_len, self.rows, self.fresh = cache, positions, kv_len, rows, fresh
        self.count = positions.shape[0]
        rows_index = torch.arange(self.count, device=positions.device) if rows is None else rows
        self.row_index = rows_index[:, None]

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
        self.cache.k[layer][self.row_index, :, self.positions] = k
        self.cache.v[layer][self.row_index, :, self.positions] = v

    def read(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        k, v = self.cache.k[layer][:, :, :self.kv_len], self.cache.v[layer][:, :, :self.kv_len]
        return (k[:self.count], v[:self.count]) if self.rows is None else (k[self.rows], v[self.rows])

    def mask(self, positions: torch.Tensor) -> torch.Tensor:
        return visible(positions, self.kv_len)


class PagePool:
    """Host-side free list of pool pages 1..pages-1 (page 0 is the trash page)."""

    def __init__(self, pages: int) -> None:
        self.free = list(range(pages - 1, 0, -1))

    def allocate(self, n: int) -> list[int]:
        if n > len(self.free):
            raise MemoryError(f"KV page pool exhausted: {n} pages asked, {len(self.free)} free")
        return [self.free.pop() for _ in range(n)]

    def release(self, pages: list[int]) -> None:
        self.free.extend(reversed(pages))


def pages_for(tokens: int, page_size: int) -> int:
    return -(-tokens // page_size)


@dataclass(frozen=True)
class PageLayout:
    pages: int
    """Pool pages, the trash page 0 included."""
    page_size: int = 16
    """Tokens per page."""
    rows: int = 1
    """Sequences with a block table row."""
    max_pages: int = 1
    """Block table width: pages the longest sequence may hold."""


class PagedKVCache:
    """A pool of pages and a block table (``layout``), all pages zeroed, every table entry the trash page."""

    def __init__(self, cfg: LLMConfig, layout: PageLayout, device: torch.device, dtype: torch.dtype) -> None:
        shape = (cfg.layers, layout.pages, cfg.kv_heads, layout.page_size, cfg.head_dim)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.page_size = layout.page_size
        self.table = torch.zeros(layout.rows, layout.max_pages, device=device, dtype=torch.long)

    def assign(self, row: int, pages: list[int]) -> None:
        """Row ``row``'s positions 0.. live in ``pages`` (the rest of its table: the trash page)."""
        entries = torch.zeros(self.table.shape[1], dtype=torch.long)
        entries[:len(pages)] = torch.tensor(pages, dtype=torch.long)
        self.table[row].copy_(entries, non_blocking=True)

    def bind(self, positions: torch.Tensor, kv_len: int, rows: torch.Tensor | None = None,
             fresh: bool = False) -> PagedStep:
        """As :meth:`DenseKVCache.bind`, through the rows' block tables."""
        return PagedStep(self, positions, kv_len, rows, fresh)

    def nbytes(self) -> int:
        return 2 * self.k.numel() * self.k.element_size()


class PagedStep:
    def __init__(self, cache: PagedKVCache, positions: torch.Tensor, kv_len: int, rows: torch.Tensor | None,
                 fresh: bool) -> None:
        ps, self.fresh = cache.page_size, fresh
        table = cache.table[:positions.shape[0]] if rows is None else cache.table[rows]
        self.cache, self.pages = cache, table[:, :pages_for(kv_len, ps)]
        self.page, self.offset = table.gather(1, positions // ps), positions % ps

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> None:
        self.cache.k[layer][self.page, :, self.offset] = k
        self.cache.v[layer][self.page, :, self.offset] = v

    def read(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        def gather(pool: torch.Tensor) -> torch.Tensor:
            b, n = self.pages.shape
            g = pool[self.pages]  # (batch, pages, kv_heads, page_size, dim)
            return g.transpose(1, 2).reshape(b, g.shape[2], n * g.shape[3], g.shape[4])
        return gather(self.cache.k[layer]), gather(self.cache.v[layer])

    def mask(self, positions: torch.Tensor) -> torch.Tensor:
        return visible(positions, self.pages.shape[1] * self.cache.page_size)
